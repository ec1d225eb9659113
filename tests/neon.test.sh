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
x86_hash=$("$BUILD/tests/test_simd" | sed -n 's/^simd hash //p')
x86_isa=$("$BUILD/tests/test_simd" | sed -n 's/^vec16 family: //p')
check "the x86 build ($x86_isa) prints its hash ($x86_hash)" test -n "$x86_hash"

for fam in neon c; do
    dir=build-isa/aarch64-$fam
    mkdir -p "$dir"
    extra=""
    [ $fam = c ] && extra="-DVEC_FORCE_C"
    # objects rebuilt only when their source (or a header) is newer; two compilers at a time
    srcs="$(ls kernels/*.c) worker/gguf.c tests/test_simd.c tests/test_kv.c tests/test_quant.c"
    newest_h=$(ls -t kernels/*.h worker/gguf.h tests/check.h | head -n 1)
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
        [ $t = test_quant ] && objs="$objs $dir/obj/worker_gguf.o"
        # shellcheck disable=SC2086
        $CC_ARM -pthread -o "$dir/$t" $objs -lm >> "$T/cc-$fam.log" 2>&1 || built=0
    done
    [ $built -eq 1 ] || head -n 20 "$T/cc-$fam.log"
    check "kernels and kernel tests cross-compile for AArch64 ($fam)" test $built -eq 1
    [ $built -eq 1 ] || continue
    for t in test_simd test_kv test_quant; do
        $QEMU "$dir/$t" > "$T/$fam-$t.out" 2>&1
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

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
