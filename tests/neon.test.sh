#!/usr/bin/env bash
# neon.test.sh — the kernels on AArch64 NEON give the x86 build's bits (docs/DESIGN.md §2.7). Run by
# tests/run.sh from the repository root with $BUILD set; prints its own closing line.
#   - cross-compiles kernels/ with the kernel unit tests (test_simd, test_kv, test_quant: they use
#     kernels/ and the GGUF reader only, not the worker's libraries) with Debian's
#     aarch64-linux-gnu-gcc, twice: the NEON family and the plain C one (-DVEC_FORCE_C), into
#     build-isa/aarch64-{neon,c}/;
#   - runs them under qemu-aarch64: every check of each passes, and test_simd's hash of all its
#     outputs is the same for NEON, for plain C on AArch64, and for this build on x86.
# Needs gcc-aarch64-linux-gnu and qemu-user (make test installs them); without them, or on a host
# that is not x86_64, it skips with a line saying why.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)
skip() { echo "skip: $1"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }

CC_ARM=aarch64-linux-gnu-gcc
QEMU="qemu-aarch64 -L /usr/aarch64-linux-gnu"
[ "$(uname -m)" = x86_64 ] || skip "the NEON cross-check runs on x86_64 hosts"
command -v $CC_ARM > /dev/null || skip "no $CC_ARM (Debian package gcc-aarch64-linux-gnu; make test installs it)"
command -v qemu-aarch64 > /dev/null || skip "no qemu-aarch64 (Debian package qemu-user; make test installs it)"
[ -x "$BUILD/tests/test_simd" ] || skip "needs $BUILD/tests/test_simd"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CFLAGS_ARM="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O2 -g -pthread -I. -ffp-contract=off -fno-fast-math"
# Can qemu-user start guest threads here? (Debian 12's qemu 7.2 hangs in the guest's first
# pthread_create on some hosts.) If not, the tests run their pools with one thread
# (STRATA_TEST_THREADS=1: no result depends on it) and say so; every emulated run has a timeout.
printf '#include <pthread.h>\n#include <stdio.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; void *r; if (pthread_create(&t, 0, f, (void *)1) || pthread_join(t, &r)) return 1; puts("threads ok"); return r != (void *)1; }\n' > "$T/pt.c"
threads=2
if ! { $CC_ARM -pthread -o "$T/pt" "$T/pt.c" && timeout 20 $QEMU "$T/pt" | grep -q 'threads ok'; } 2> /dev/null; then
    threads=1
    echo "# note: qemu-aarch64 ($(qemu-aarch64 --version | head -n 1)) cannot start a guest thread on this host (kernel $(uname -r)): the emulated tests run one thread"
fi
export STRATA_TEST_THREADS=$threads
x86_hash=$("$BUILD/tests/test_simd" | sed -n 's/^simd hash //p')
x86_isa=$("$BUILD/tests/test_simd" | sed -n 's/^vec16 family: //p')
check "the x86 build ($x86_isa) prints its hash ($x86_hash)" test -n "$x86_hash"

for fam in neon c; do
    dir=build-isa/aarch64-$fam
    mkdir -p "$dir"
    extra=""
    [ $fam = c ] && extra="-DVEC_FORCE_C"
    # objects rebuilt only when their source (or a header) is newer; two compilers at a time
    srcs="$(ls kernels/*.c) worker/gguf.c proto/safeio.c tests/test_simd.c tests/test_kv.c tests/test_quant.c"
    newest_h=$(ls -t kernels/*.h worker/gguf.h proto/safeio.h tests/check.h tests/proc.h | head -n 1)
    for src in $srcs; do
        o=$dir/obj/$(echo "${src%.c}" | tr / _).o
        if [ ! -f "$o" ] || [ "$src" -nt "$o" ] || [ "$newest_h" -nt "$o" ]; then echo "$src $o"; fi
    done > "$T/todo-$fam"
    mkdir -p "$dir/obj"
    # shellcheck disable=SC2086
    xargs -P 2 -L 1 sh -c "nice -n 10 $CC_ARM $CFLAGS_ARM $extra -c \$0 -o \$1 || { rm -f \$1; exit 255; }" \
        < "$T/todo-$fam" > "$T/cc-$fam.log" 2>&1
    built=1
    for t in test_simd test_kv test_quant; do
        objs="$(ls "$dir"/obj/kernels_*.o) $dir/obj/tests_$t.o"
        [ $t = test_quant ] && objs="$objs $dir/obj/worker_gguf.o $dir/obj/proto_safeio.o"
        # shellcheck disable=SC2086
        $CC_ARM -pthread -o "$dir/$t" $objs -lm >> "$T/cc-$fam.log" 2>&1 || built=0
    done
    [ $built -eq 1 ] || head -n 20 "$T/cc-$fam.log"
    check "kernels and kernel tests cross-compile for AArch64 ($fam)" test $built -eq 1
    [ $built -eq 1 ] || continue
    for t in test_simd test_kv test_quant; do
        timeout 900 $QEMU "$dir/$t" > "$T/$fam-$t.out" 2>&1
        rc=$?
        line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$T/$fam-$t.out" | tail -n 1)
        check "$t under qemu-aarch64 ($fam): $line, exit $rc" test $rc -eq 0 -a -n "$line"
        [ $rc -eq 0 ] || grep -E '^FAIL' "$T/$fam-$t.out" | head -n 10
    done
    isa=$(sed -n 's/^vec16 family: //p' "$T/$fam-test_simd.out")
    check "the AArch64 $fam build uses the $fam family (got $isa)" test "$isa" = "$fam"
    h=$(sed -n 's/^simd hash //p' "$T/$fam-test_simd.out")
    check "test_simd's hash: AArch64 $fam ($h) = x86 $x86_isa ($x86_hash)" test -n "$h" -a "$h" = "$x86_hash"
done

# ---- end to end: the whole worker for AArch64 NEON under qemu, against the native x86 build --------
# The worker's command-line mode (no sockets, one thread: Debian 12's qemu-user hangs in the guest's
# pthread_create on this kind of host, so the protocol's threads cannot run under it) prefills 300
# tokens and generates 16 on several models and KV formats: the dumped logit rows of every position
# and the generated ids equal the x86 build's byte for byte. Needs the worker's libraries for arm64
# (Debian multiarch: make test adds the arm64 architecture and installs them; without them this part
# skips, saying so).
WRK_ARM=build-isa/aarch64-neon/strata-worker
arm_libs=1
for l in nng msgpackc pcre2-8 utf8proc jansson crypto; do
    [ -e /usr/lib/aarch64-linux-gnu/lib$l.so ] || arm_libs=0
done
if [ $arm_libs -eq 0 ]; then
    skip=$((skip + 1))
    echo "skip - the NEON worker end to end: no arm64 libraries (Debian multiarch: dpkg --add-architecture arm64; apt-get install libnng-dev:arm64 libmsgpack-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libjansson-dev:arm64 libssl-dev:arm64)"
else
    wsrc="$(ls proto/*.c kernels/*.c worker/*.c)"
    # shellcheck disable=SC2086
    newest=$(ls -t $wsrc proto/*.h kernels/*.h worker/*.h | head -n 1)
    if [ ! -x "$WRK_ARM" ] || [ "$newest" -nt "$WRK_ARM" ]; then
        # shellcheck disable=SC2086
        nice -n 10 $CC_ARM $CFLAGS_ARM -DSTRATA_GIT='"neon-test"' -o "$WRK_ARM" $wsrc \
            -lnng -lmsgpackc -lpcre2-8 -lutf8proc -ljansson -lcrypto -lpthread -lm > "$T/cc-worker.log" 2>&1 \
            || { rm -f "$WRK_ARM"; head -n 20 "$T/cc-worker.log"; }
    fi
    check "the worker cross-compiles for AArch64 (NEON)" test -x "$WRK_ARM"
    if [ -x "$WRK_ARM" ]; then
        cat tests/fixtures/texts/*.txt > "$T/doc.txt"
        for spec in stories260K:f32 stories260K:f16 stories260K:int8 stories260K:kivi4 rand-gemma3:q4_0+roth \
                    rand-llama:tq4 rand-llama:e4m3s rand-gemma3:int8 rand-gemma3:q8_0 rand-qwen3moe:f16 rand-qwen3moe:nvfp4 \
                    rand-gptoss:f16 rand-gptoss-mxfp4:int8 rand-qwen2moe:fp8 rand-qwen35:int8 rand-qwen35moe:f16; do
            m=${spec%%:*} kv=${spec#*:}
            MODEL=tests/fixtures/models/$m.gguf
            "$BUILD/strata-worker" --model "$MODEL" --tokenize < "$T/doc.txt" | tr -s ' \n' '\n\n' | grep . \
                | head -n 300 > "$T/ids.txt"
            for side in x86 neon; do
                run=("$BUILD/strata-worker"); [ $side = neon ] && run=(timeout 600 $QEMU "$WRK_ARM")
                "${run[@]}" --model "$MODEL" --kv "$kv" --threads 1 --prefill 64 --tokens-file "$T/ids.txt" \
                    --dump-logits "$T/$side.bin" --max-new 16 > "$T/$side.gen" 2> "$T/$side.err"
                echo $? > "$T/$side.rc"
            done
            check "NEON worker end to end, $m kv $kv: exit 0 both, logit rows of 300 positions ($(stat -c %s "$T/neon.bin" 2> /dev/null) bytes) and 16 generated ids equal the x86 build's" \
                bash -c "[ \"\$(cat '$T/x86.rc' '$T/neon.rc')\" = \"\$(printf '0\n0')\" ] && [ -s '$T/x86.bin' ] && cmp -s '$T/x86.bin' '$T/neon.bin' && cmp -s '$T/x86.gen' '$T/neon.gen'"
        done
    fi
fi

if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
