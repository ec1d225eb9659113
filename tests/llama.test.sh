#!/usr/bin/env bash
# llama.test.sh — the llama backend (kernels/llama/backend_llama.c: llama.cpp's libllama behind the
# backend seam, `--backend llama`, `llama:SPEC` arms) end to end (run by tests/run.sh from the
# repository root with $BUILD set; prints its own closing line "N passed, N failed").
#
# Needs the llama build: `make llama` (which `make test` runs first) links strata-worker with it and
# builds $BUILD/tests/llama_direct (libllama called directly, no strata code). Without it every check
# is skipped, saying why. Checks:
#   - the worker's rows (--dump-logits) equal libllama's own (llama_direct, same settings) byte for
#     byte: stories260K f16 / f32 with flash attention on, off and auto, chunks of 64 over 200
#     tokens; on SmolLM2 (when it is in the cache, `make models`) q8_0, q4_0 and K q8_0 / V f16, and
#     q8_0 with llama.cpp's K/V rotation off (--kv-rotation off = LLAMA_ATTN_ROT_DISABLE=1), which
#     differs from the rotated rows;
#   - strata f32 and llama.cpp f32 (flash attention off) on the all-F32 rand-llama: max |dlogit| within
#     test_real's bound for that model (1e-4);
#   - truncation: llama.cpp's rows after dropping positions >= 40 and prefilling them again are the
#     rows of one pass, byte for byte (libllama alone, then through the worker in the sweep below);
#   - a sweep with arms f16,llama:f16 on stories260K runs, its README names each arm's engine, its
#     meta.json keeps the llama arm's device (llama.cpp-0c1e570-cpu+fa-...); and one pass = separate
#     runs for the llama arm (flash attention on, measured chunk-invariant on this model): its
#     teacher-forced rows at depths 100 200 300, each reached after a fork probe and a truncation,
#     and its fork tokens equal from-scratch runs of the worker. The sweep is --per-position (every
#     row asked, as --dump-logits asks them): llama.cpp computes the last layer for the asked rows
#     only, so a row's bits also depend on how many rows its forward asked for (docs/DESIGN.md
#     §1.1.1);
#   - the same on a hybrid model (rand-qwen35), whose recurrent state llama.cpp cannot cut back: the
#     backend's branch points (docs/DESIGN.md §1.1.1);
#   - bad --backend / format combinations give one clear error each (worker and driver).
# Time: ~30 s after the build (SmolLM2 runs use 1 thread: llama.cpp's thread pool spins, which on a
# loaded 2-core machine costs more than the second thread gains).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
DIRECT=$BUILD/tests/llama_direct
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

need_engine   # tests/lib.sh: skip without the binaries; $T
MODEL=tests/fixtures/models/stories260K.gguf
SMOL=${STRATA_CACHE:-$HOME/.cache/strata}/smollm2-135m-instruct-q4_1.gguf

if [ ! -x "$DIRECT" ] || ! "$WRK" --model "$MODEL" --backend llama --max-context 16 --prompt x > /dev/null 2> "$T/probe.err"; then
    echo "skip: the llama.cpp build is absent ($DIRECT missing, or strata-worker built without it: $(head -c 300 "$T/probe.err")); \`make llama\` builds it (it needs PyPI and cmake)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi

# same_rows DESC MODEL TOKENS CTX CHUNK K V FA [WORKER OPTIONS...]: the worker's rows = llama_direct's
same_rows() {
    local desc=$1 m=$2 toks=$3 ctx=$4 chunk=$5 k=$6 v=$7 fa=$8
    shift 8
    rm -f "$T/w.bin" "$T/d.bin"
    "$WRK" --model "$m" --backend llama --kv-k "$k" --kv-v "$v" --flash-attn "$fa" --max-context "$ctx" \
        --prefill "$chunk" --threads 1 --tokens-file "$toks" --dump-logits "$T/w.bin" "$@" 2> "$T/w.err"
    "$DIRECT" "$m" "$toks" "$T/d.bin" "$ctx" "$chunk" 1 "$k" "$v" "$fa" 2> "$T/d.err"
    if [ -s "$T/w.bin" ] && cmp -s "$T/w.bin" "$T/d.bin"; then ok "$desc"
    else bad "$desc: $(cat "$T/w.err" "$T/d.err" | head -c 400)"; fi
}

seq 0 199 | awk '{ print ($1 * 37) % 500 + 3 }' > "$T/t200.tok"
for fa in on off auto; do
    same_rows "stories260K f16, flash attention $fa: worker rows = libllama's, 200 tokens in chunks of 64" \
        "$MODEL" "$T/t200.tok" 256 64 f16 f16 $fa
done
same_rows "stories260K f32: worker rows = libllama's" "$MODEL" "$T/t200.tok" 256 64 f32 f32 auto

# strata f32 beside llama.cpp f32 (flash attention off, as tests/test_real's llama.cpp fixtures were
# made) on an all-F32 model: within test_real's bound for rand-llama, 1e-4 (only the summation
# order differs)
R=tests/fixtures/models/rand-llama.gguf
cat tests/fixtures/texts/*.txt | "$WRK" --model "$R" --tokenize | tr ' ' '\n' | grep . | head -n 200 > "$T/rl.tok"
"$WRK" --model "$R" --kv f32 --max-context 256 --threads 1 --tokens-file "$T/rl.tok" --dump-logits "$T/rs.bin" 2> "$T/w.err"
"$WRK" --model "$R" --backend llama --flash-attn off --kv f32 --max-context 256 --threads 1 --tokens-file "$T/rl.tok" \
    --dump-logits "$T/rl.bin" 2>> "$T/w.err"
maxd=$(python3 -c 'import struct, sys
a, b = (open(f, "rb").read() for f in sys.argv[1:3])
assert a[:8] == b[:8] and len(a) == len(b) and len(a) > 8
n = (len(a) - 8) // 4
print(max(abs(p - q) for p, q in zip(struct.unpack("%df" % n, a[8:]), struct.unpack("%df" % n, b[8:]))))' \
    "$T/rs.bin" "$T/rl.bin" 2> /dev/null)
check "rand-llama f32: strata and llama.cpp rows within 1e-4 over 200 positions (max |dlogit| ${maxd:-none})" \
    python3 -c "import sys; sys.exit(0 if '$maxd' and float('$maxd') <= 1e-4 else 1)"

if [ -f "$SMOL" ]; then
    cat tests/fixtures/texts/*.txt | "$WRK" --model "$SMOL" --tokenize | tr ' ' '\n' | grep . | head -n 64 > "$T/s.tok"
    same_rows "SmolLM2 q8_0: worker rows = libllama's (64 tokens, chunks of 32)" "$SMOL" "$T/s.tok" 128 32 q8_0 q8_0 auto
    same_rows "SmolLM2 q4_0: worker rows = libllama's" "$SMOL" "$T/s.tok" 128 32 q4_0 q4_0 on
    same_rows "SmolLM2 K q8_0 / V f16: worker rows = libllama's" "$SMOL" "$T/s.tok" 128 32 q8_0 f16 on
    cp "$T/w.bin" "$T/k8.bin" 2> /dev/null
    # --kv-rotation off is llama.cpp's LLAMA_ATTN_ROT_DISABLE=1, and it changes the rows (head dim 64)
    "$WRK" --model "$SMOL" --backend llama --kv q8_0 --kv-rotation off --max-context 128 --prefill 32 --threads 1 \
        --tokens-file "$T/s.tok" --dump-logits "$T/roff.bin" 2> "$T/w.err"
    "$WRK" --model "$SMOL" --backend llama --kv q8_0 --max-context 128 --prefill 32 --threads 1 \
        --tokens-file "$T/s.tok" --dump-logits "$T/ron.bin" 2>> "$T/w.err"
    LLAMA_ATTN_ROT_DISABLE=1 "$DIRECT" "$SMOL" "$T/s.tok" "$T/doff.bin" 128 32 1 q8_0 q8_0 auto 2> "$T/d.err"
    check "SmolLM2 q8_0 --kv-rotation off: rows = libllama's with LLAMA_ATTN_ROT_DISABLE=1" \
        cmp -s "$T/roff.bin" "$T/doff.bin"
    check "SmolLM2 q8_0: llama.cpp's rotation on and off give different rows" \
        bash -c "[ -s '$T/ron.bin' ] && ! cmp -s '$T/ron.bin' '$T/roff.bin'"
    # truncation in libllama: positions >= 40 dropped and prefilled again = one pass
    "$DIRECT" "$SMOL" "$T/s.tok" "$T/tr.bin" 128 32 1 q8_0 q8_0 auto 40 2> "$T/d.err"
    "$DIRECT" "$SMOL" "$T/s.tok" "$T/one.bin" 128 32 1 q8_0 q8_0 auto 2>> "$T/d.err"
    check "SmolLM2 q8_0: llama.cpp rows after truncating to 40 and prefilling again = one pass, byte for byte" \
        bash -c "[ -s '$T/tr.bin' ] && cmp -s '$T/tr.bin' '$T/one.bin'"
else
    skip=$((skip + 1))
    echo "skip: $SMOL is not in the cache (make models): the SmolLM2 checks (quantised K/V, rotation, truncation)"
fi

# a mixed-engine sweep: strata f16 beside llama.cpp f16
cat tests/fixtures/texts/*.txt | "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok"
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:f16 --ref f16 --depths 3 --max-depth 300 \
    --fork 8 --per-position --out "$T/r" --dump-rows "$T/rows" --quiet 2> "$T/r.err"
rc=$?
check "sweep --arms f16,llama:f16 exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r.err"
check "README names each arm's engine (f16 strata, llama:f16 llama.cpp with its batch variance)" \
    grep -Eq '^Engines: f16 strata \(`cpu-[a-z0-9]+`\); llama:f16 llama\.cpp \(`llama\.cpp-0c1e570-cpu\+fa-on\+rot-off`, batch variance [0-9.e+-]+ logits over [0-9]+ rows?\)' "$T/r/README.md"
dev=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1] + "/meta.json"))
print([a for a in m["arms"] if a["name"] == "llama:f16"][0]["device"])' "$T/r" 2> /dev/null)
check "meta.json keeps the llama arm's device ($dev)" test "$dev" = "llama.cpp-0c1e570-cpu+fa-on+rot-off"
same=0; same_tok=0
for d in 100 200 300; do
    tr ' ' '\n' < "$T/doc.tok" | grep . | head -n "$d" > "$T/prefix.tok"
    "$WRK" --model "$MODEL" --backend llama --kv f16 --threads 1 --tokens-file "$T/prefix.tok" --dump-logits "$T/dump.bin" \
        --max-new 8 > "$T/gen.txt" 2> "$T/w.err"
    tail -c $((512 * 4)) "$T/dump.bin" | cmp -s - "$T/rows/llama_f16-$d.f32" && same=$((same + 1))
    want=$(tr ' ' ',' < "$T/gen.txt")
    got=$(awk -F'\t' -v d="$d" '$1 == d && $2 == "llama:f16" { print $5; exit }' "$T/r/forks.tsv")
    [ -n "$want" ] && [ "$want" = "$got" ] && same_tok=$((same_tok + 1))
done
check "llama:f16: teacher-forced rows at depths 100 200 300 (after forks and truncations) = from-scratch runs ($same/3)" \
    test $same -eq 3
check "llama:f16: fork tokens at the 3 depths = from-scratch greedy generation ($same_tok/3)" test $same_tok -eq 3

# bad combinations: one line each
# wbad DESC RC REGEX ARGS...: the worker fails with RC and one line matching REGEX
wbad() {
    local desc=$1 want=$2 re=$3
    shift 3
    "$WRK" --model "$MODEL" --max-context 16 --prompt x "$@" > /dev/null 2> "$T/bad.err"
    local rc=$? lines
    lines=$(wc -l < "$T/bad.err")
    if [ $rc -eq "$want" ] && [ "$lines" -eq 1 ] && grep -Eq -e "$re" "$T/bad.err"; then ok "$desc (rc $rc)"
    else bad "$desc (rc $rc, $lines lines): $(cat "$T/bad.err")"; fi
}
wbad "worker --backend vulkan is refused" 2 "--backend: cpu, ref, llama or llama:DEVICE" --backend vulkan
# a device this build lacks (a CPU build has only ggml's "CPU"): one error naming the build's devices
wbad "worker --backend llama:cuda:0 on a CPU-only libllama names the device and what the build has" 1 \
    "no device 'cuda:0' \(CUDA0\) in this llama.cpp build, which has: CPU; build one for it" --backend llama:cuda:0
wbad "worker --backend llama:vulkan:x is refused (index 0..255)" 1 "device 'vulkan:x': the index must be 0..255" \
    --backend llama:vulkan:x
wbad "worker --backend llama --kv int8 names the formats llama.cpp takes" 1 \
    "'int8' is not one llama.cpp stores \(it takes f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1" --backend llama --kv int8
wbad "worker --backend llama --kv q8_0+rot is refused (llama.cpp rotates on its own)" 1 "q8_0\+rot' is not one" \
    --backend llama --kv q8_0+rot
wbad "worker --backend llama with a per-layer mix is refused" 1 "one K format in every layer" --backend llama --kv f16+f32@0
wbad "worker --backend llama, quantised V with flash attention off is refused" 1 "quantised V \(q8_0\) only with flash attention" \
    --backend llama --kv-v q8_0 --flash-attn off
wbad "worker --flash-attn without --backend llama is refused" 2 "go with --backend llama" --flash-attn on
wbad "worker --kv-rotation maybe is refused" 2 "--kv-rotation: on or off" --backend llama --kv-rotation maybe
wbad "worker --kv-resident without --backend llama is refused" 2 "--kv-resident go with --backend llama" --kv-resident host
wbad "worker --kv-resident hots is refused" 2 "--kv-resident: host or device, got 'hots'" --backend llama --kv-resident hots
"$WRK" --model "$MODEL" --backend llama --kv-resident host --max-context 16 --tokens-file "$T/t200.tok" --max-context 256 \
    --dump-logits "$T/kvh.bin" --threads 1 2> "$T/w.err"
"$WRK" --model "$MODEL" --backend llama --max-context 256 --tokens-file "$T/t200.tok" --dump-logits "$T/kvd.bin" --threads 1 \
    2>> "$T/w.err"
check "worker --kv-resident host on the cpu device: the same rows (the KV cache is host memory already)" \
    bash -c "[ -s '$T/kvh.bin' ] && cmp -s '$T/kvh.bin' '$T/kvd.bin'"
wbad "worker --backend llama --rope-angles f32 is refused" 2 "llama.cpp computes its own" --backend llama --rope-angles f32
# aligned chunks (worker/engine.h, docs/DESIGN.md §1.1.1): SmolLM2 f16 with flash attention is NOT
# chunk-invariant in llama.cpp (below: a chunk of 32 and one of 64 give different rows), yet one pass
# over depths that are not multiples of the chunk (100 200 300, chunk 64) equals separate runs, in a
# sweep without --per-position and in one with it (the same rows asked in every forward), for that
# variant configuration and for an invariant one (q8_0); meta.json records the batch variance the
# re-run chunks showed (> 0 for f16, 0 for q8_0)
if [ -f "$SMOL" ]; then
    cat tests/fixtures/texts/*.txt | "$WRK" --model "$SMOL" --tokenize > "$T/sdoc.tok"
    for pp in "" --per-position; do
        "$DRV" sweep --model "$SMOL" --tokens-file "$T/sdoc.tok" --arms llama:q8_0,llama:f16 --ref llama:q8_0 --depths 3 \
            --max-depth 300 --fork 8 --chunk 64 --prefill 64 --threads 1 $pp --out "$T/al$pp" --dump-rows "$T/alrows$pp" \
            --quiet 2> "$T/al.err"
        rc=$?
        check "SmolLM2 sweep --arms llama:q8_0,llama:f16 --chunk 64 ${pp:-(rows of the depths only)} exits 0 (rc $rc)" test $rc -eq 0
        [ $rc -ne 0 ] && cat "$T/al.err"
    done
    for k in f16 q8_0; do
        same=0; same_tok=0; same_pp=0
        for d in 100 200 300; do
            tr ' ' '\n' < "$T/sdoc.tok" | grep . | head -n "$d" > "$T/prefix.tok"
            "$WRK" --model "$SMOL" --backend llama --kv $k --threads 1 --prefill 64 --tokens-file "$T/prefix.tok" \
                --dump-logits "$T/dump.bin" --max-new 8 > "$T/gen.txt" 2> "$T/w.err"
            tail -c $((49152 * 4)) "$T/dump.bin" > "$T/last.f32"
            cmp -s "$T/last.f32" "$T/alrows/llama_$k-$d.f32" && same=$((same + 1))
            cmp -s "$T/last.f32" "$T/alrows--per-position/llama_$k-$d.f32" && same_pp=$((same_pp + 1))
            if [ $k = f16 ]; then
                want=$(tr ' ' ',' < "$T/gen.txt")
                got=$(awk -F'\t' -v d="$d" '$1 == d && $2 == "llama:f16" { print $5; exit }' "$T/al/forks.tsv")
                [ -n "$want" ] && [ "$want" = "$got" ] && same_tok=$((same_tok + 1))
            fi
        done
        check "SmolLM2 llama:$k, chunk 64: rows at depths 100 200 300 of one pass = separate runs ($same/3)" test $same -eq 3
        check "SmolLM2 llama:$k: the same rows in the --per-position sweep ($same_pp/3)" test $same_pp -eq 3
        [ $k = f16 ] && check "SmolLM2 llama:f16: fork tokens at the 3 depths = separate greedy runs ($same_tok/3)" \
            test $same_tok -eq 3
    done
    "$WRK" --model "$SMOL" --backend llama --kv f16 --threads 1 --prefill 32 --tokens-file "$T/prefix.tok" \
        --dump-logits "$T/dump32.bin" 2> "$T/w.err"
    check "SmolLM2 llama:f16 is chunk-variant here: the row at depth 300 from chunks of 32 differs from chunks of 64" \
        bash -c "[ -s '$T/dump32.bin' ] && ! tail -c $((49152 * 4)) '$T/dump32.bin' | cmp -s - '$T/last.f32'" 2>/dev/null
    bv=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1] + "/meta.json"))
b = {a["name"]: a["batch_variance"] for a in m["arms"]}
print(b["llama:f16"]["rows"], b["llama:f16"]["max_abs_logit"], b["llama:q8_0"]["rows"], b["llama:q8_0"]["max_abs_logit"])' "$T/al" 2> /dev/null)
    read -r bv_rows bv_f16 bv_q8rows bv_q8 <<< "${bv:-0 0 0 1}"
    check "meta.json batch_variance: f16 rows $bv_rows max |dlogit| $bv_f16 > 0; q8_0 rows $bv_q8rows max $bv_q8 = 0" \
        python3 -c "import sys; sys.exit(0 if $bv_rows >= 2 and $bv_f16 > 0 and $bv_q8rows >= 2 and $bv_q8 == 0 else 1)"
else
    skip=$((skip + 1))
    echo "skip: $SMOL is not in the cache (make models): the aligned-chunk checks"
fi

# --devices: the local llama arms get the list's devices in turn (here the only one a CPU build has)
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:f16,llama:f32 --ref f16 --depths 2 \
    --max-depth 100 --fork 4 --devices cpu --kv-resident host --out "$T/dev" --quiet 2> "$T/dev.err"
rc=$?
check "sweep --devices cpu --kv-resident host exits 0 (rc $rc)" test $rc -eq 0
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:f16,llama:f32 --ref f16 --depths 2 \
    --max-depth 100 --fork 4 --devices cpu,cuda:0 --out "$T/dev1" --quiet 2> "$T/dev1.err"
rc=$?
check "--devices cpu,cuda:0 gives the second llama arm (llama:f32) cuda:0, which this build lacks: it alone fails (rc $rc)" \
    bash -c "[ $rc -ne 0 ] && grep -q \"arm llama:f32: .*no device 'cuda:0'\" '$T/dev1.err' && ! grep -q 'arm llama:f16:' '$T/dev1.err'"
bad_input "sweep --devices cuda:0 on a CPU-only libllama: one error naming the build's devices" 1 \
    "no device 'cuda:0' \(CUDA0\) in this llama.cpp build, which has: CPU" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:f16 --depths 2 --max-depth 100 --fork 2 \
    --devices cuda:0 --out "$T/dev2" --quiet
bad_input "sweep --devices 'cpu,,x' is refused" 2 "--devices 'cpu,,x': a comma-separated list" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:f16 --depths 2 --max-depth 100 --fork 2 \
    --devices cpu,,x --out "$T/dev3" --quiet
bad_input "sweep --kv-resident elsewhere is refused" 2 "--kv-resident: host or device" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:f16 --depths 2 --max-depth 100 --fork 2 \
    --kv-resident elsewhere --out "$T/dev4" --quiet

# a hybrid model (rand-qwen35: linear-attention layers 0 and 2): llama.cpp cannot cut its recurrent
# state back, so the backend keeps a branch point (sequence 1) where each fork probe begins; one
# pass = separate runs for its llama arm too
Q=tests/fixtures/models/rand-qwen35.gguf
cat tests/fixtures/texts/*.txt | "$WRK" --model "$Q" --tokenize > "$T/q.tok"
"$DRV" sweep --model "$Q" --tokens-file "$T/q.tok" --arms f16,llama:f16 --ref f16 --depths 3 --max-depth 300 \
    --fork 8 --per-position --out "$T/q" --dump-rows "$T/qrows" --quiet 2> "$T/q.err"
rc=$?
check "rand-qwen35 (hybrid): sweep --arms f16,llama:f16 exits 0, truncating after every fork probe (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/q.err"
same=0; same_tok=0
for d in 100 200 300; do
    tr ' ' '\n' < "$T/q.tok" | grep . | head -n "$d" > "$T/prefix.tok"
    "$WRK" --model "$Q" --backend llama --kv f16 --threads 1 --tokens-file "$T/prefix.tok" --dump-logits "$T/dump.bin" \
        --max-new 8 > "$T/gen.txt" 2> "$T/w.err"
    tail -c $((512 * 4)) "$T/dump.bin" | cmp -s - "$T/qrows/llama_f16-$d.f32" && same=$((same + 1))
    want=$(tr ' ' ',' < "$T/gen.txt")
    got=$(awk -F'\t' -v d="$d" '$1 == d && $2 == "llama:f16" { print $5; exit }' "$T/q/forks.tsv")
    [ -n "$want" ] && [ "$want" = "$got" ] && same_tok=$((same_tok + 1))
done
check "rand-qwen35 llama:f16: rows at depths 100 200 300 (each after a fork and a return to its branch point) = from-scratch runs ($same/3)" \
    test $same -eq 3
check "rand-qwen35 llama:f16: fork tokens = from-scratch greedy generation ($same_tok/3)" test $same_tok -eq 3
bad_input "driver: arm llama:int8 is refused before any worker starts, naming llama.cpp's formats" 2 \
    "arm 'llama:int8': llama.cpp stores one K and one V format for all layers, one of f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1, not 'int8'" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:int8 --depths 2 --max-depth 100 --fork 2 \
    --out "$T/bad1" --quiet
bad_input "driver: a llama arm with a per-layer mix is refused" 2 "arm 'llama:q8_0\+f16@0': .* not 'q8_0\+f16@0'" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,llama:q8_0+f16@0 --depths 2 --max-depth 100 --fork 2 \
    --out "$T/bad2" --quiet
check "... and neither run left a results folder" bash -c "[ ! -e '$T/bad1/meta.json' ] && [ ! -e '$T/bad2/meta.json' ]"

echo "$pass passed, $fail failed$([ $skip -gt 0 ] && echo ", $skip skipped")"
[ $fail -eq 0 ]
