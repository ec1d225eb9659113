#!/usr/bin/env bash
# Runs every test program (build/tests/test_*) and every tests/*.test.sh script from the repository
# root, sums their closing lines "N passed, N failed" and prints the total as the last line.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pass=0; fail=0; skip=0
log=$(mktemp -d)
for t in "$BUILD"/tests/test_* tests/*.test.sh; do
    [ -e "$t" ] || continue
    name=$(basename "$t")
    start=$(date +%s)
    # a hung test must not eat the CI budget: each program gets TEST_TIMEOUT seconds (default 1500)
    lim=${TEST_TIMEOUT:-1500}
    if [[ "$t" == *.sh ]]; then BUILD=$BUILD timeout -k 10 "$lim" bash "$t" >"$log/$name.out" 2>&1
    else timeout -k 10 "$lim" "$t" >"$log/$name.out" 2>&1; fi
    rc=$?
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log/$name.out" | tail -n 1)
    p=$(echo "$line" | sed -nE 's/^([0-9]+) passed.*/\1/p'); f=$(echo "$line" | sed -nE 's/.* ([0-9]+) failed.*/\1/p')
    s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "FAIL - $name timed out after ${lim}s"; fi
    if [ -z "$line" ] || { [ $rc -ne 0 ] && [ "$f" = 0 ]; }; then f=$((f + 1)); echo "FAIL - $name exited $rc without a clean closing line"; fi
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    printf '%-28s %4s passed %3s failed %3s skipped  (%ss)\n' "$name" "$p" "$f" "$s" "$(( $(date +%s) - start ))"
    if [ "$f" != 0 ]; then grep -E '^FAIL' "$log/$name.out" | head -n 20; tail -n 5 "$log/$name.out"; fi
done
rm -rf "$log"
if [ "$skip" != 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
