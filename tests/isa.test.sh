#!/usr/bin/env bash
# isa.test.sh — every build produces the same bits (docs/DESIGN.md §2.7). Run by tests/run.sh from
# the repository root with $BUILD set; prints its own closing line "N passed, N failed".
#   - builds the worker again for each SIMD family this CPU can run besides the native one: AVX2
#     (-march=haswell; needs avx2, fma and f16c in /proc/cpuinfo, else skipped with a line saying
#     so) and plain C (-march=x86-64 on x86, -DVEC_FORCE_C elsewhere), into build-isa/<family>/
#     (incremental: only the engine and the worker, a few seconds once built);
#   - runs the same short per-position sweeps (stories260K with F32 and with Q8_0 weights: the
#     fused decode kernels, head dim 8; rand-gemma3: head dim >= 32, so the vector attention,
#     K transpose and f16 / int8 / q8_0 K/V decoding; rand-gptoss: attention sinks, a sliding
#     window, the MoE with its biases and clamped SwiGLU; rand-qwen35: the linear-attention layers'
#     conv, recurrence and truncation) with the native worker and with each
#     variant's, and checks that depths.tsv, forks.tsv and positions.tsv are byte-identical;
#   - checks that each variant's handshake names its family (cpu-avx2, cpu-c).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FIX=tests/fixtures
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ ! -f "$FIX/models/stories260K.gguf" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $FIX/models/stories260K.gguf, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# the nested make must not look for the calling make's job server
unset MAKEFLAGS MFLAGS MAKELEVEL

# the families to compare with the native build: name, build flags
variants=()
if [ "$(uname -m)" = x86_64 ]; then
    flags=$(grep -m1 '^flags' /proc/cpuinfo)
    if [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* && " $flags " == *" f16c "* ]]; then
        variants+=("avx2|-O2 -march=haswell")
    else
        skip=$((skip + 1)); echo "skip - AVX2 build: this CPU lacks avx2, fma or f16c"
    fi
    variants+=("c|-O2 -march=x86-64")
else
    variants+=("c|-O2 -march=native -DVEC_FORCE_C")
fi

cat "$FIX"/stories260K/a.txt "$FIX"/stories260K/d.txt "$FIX"/texts/*.txt > "$T/doc.txt"
# the first 600 tokens: the plain C worker (fmaf in software) then takes a few seconds per sweep
"$WRK" --model "$FIX/models/stories260K.gguf" --tokenize < "$T/doc.txt" | tr ' ' '\n' | grep . | head -n 600 > "$T/doc.tok"
check "the test document has 600 tokens" test "$(wc -l < "$T/doc.tok")" -eq 600

# sweep WORKER MODEL OUT: a short per-position sweep, 3 arms, 3 depths, 6-token forks (q8_0 KV
# needs a head dim that is a multiple of 32: stories260K's is 8)
sweep() {
    local arms=f16,int8,f32
    case "$2" in *rand-gemma3* | *rand-gptoss* | *rand-qwen35*) arms=f16,int8,q8_0 ;; esac
    "$DRV" sweep --model "$2" --tokens-file "$T/doc.tok" --arms $arms --depths 3 --fork 6 \
        --per-position --chunk 64 --worker "$1" --out "$3" --quiet > "$3.log" 2>&1
}
# prefetched OBJDIR NAME: the decode weight stream (ops.o, and the fused kernels of quant_legacy.o,
# quant_k.o and quant_iq.o) and the K/V stream (attn.o) ask for their
# next rows (kernels/prefetch.h: GCC deletes calls to an out-of-line helper made of prefetches only,
# as kernels/ops.c's weight prefetch was until the seventeenth session); x86 prefetcht*/prefetchnta, AArch64 prfm
prefetched() {
    command -v objdump > /dev/null || { skip=$((skip + 1)); echo "skip - $2: no objdump"; return; }
    local o
    for o in ops attn quant_legacy quant_k quant_iq; do
        check "$2: kernels/$o.o has prefetch instructions" \
            bash -c "objdump -d '$1/kernels/$o.o' | grep -q -E 'prefetch(t[012]|nta)|prfm'"
    done
}
prefetched "$BUILD/obj" native

models="stories260K stories260K-q8_0 rand-gemma3 rand-gptoss rand-qwen35"
for m in $models; do
    sweep "$WRK" "$FIX/models/$m.gguf" "$T/native-$m"
    check "native sweep on $m exits 0" test $? -eq 0 || tail -n 3 "$T/native-$m.log"
done

for v in "${variants[@]}"; do
    name=${v%%|*}; opt=${v#*|}
    dir=build-isa/$name
    start=$(date +%s)
    nice -n 10 make -s -j2 BUILD="$dir" OPT="$opt" SAN= ISA= "$dir/strata-worker" > "$T/make-$name.log" 2>&1
    rc=$?
    check "the $name worker builds ($opt, $(( $(date +%s) - start )) s)" test $rc -eq 0
    if [ $rc -ne 0 ]; then tail -n 20 "$T/make-$name.log"; continue; fi
    prefetched "$dir/obj" "$name"
    for m in $models; do
        sweep "$dir/strata-worker" "$FIX/models/$m.gguf" "$T/$name-$m"
        check "$name sweep on $m exits 0" test $? -eq 0 || tail -n 3 "$T/$name-$m.log"
        for f in depths.tsv forks.tsv positions.tsv; do
            check "$name = native: $m $f byte-identical" cmp -s "$T/native-$m/$f" "$T/$name-$m/$f"
        done
    done
    check "the $name worker's meta.json names its SIMD family (cpu-$name)" grep -q "cpu-$name" "$T/$name-stories260K/meta.json"
done

if [ "$skip" != 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
