#!/usr/bin/env bash
# lcppkld.test.sh — the statistics of tests/ref/lcpp_kld.py (llama.cpp's --kl-divergence summary:
# mean and standard error, covariance, percentiles, median, the summary of a two-token hand case)
# against values worked by hand. Needs only python3 (no llama.cpp, no numpy): CI never builds
# llama.cpp, so the comparison itself (lcpp_kld.py run) is not part of make test.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
out=$(python3 tests/ref/lcpp_kld.py selftest 2>&1)
echo "$out" | grep -E '^FAIL' || true
p=$(echo "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p')
f=$(echo "$out" | sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p')
check "lcpp_kld.py selftest printed its closing line" [ -n "$p" -a -n "$f" ]
pass=$((pass + ${p:-0})); fail=$((fail + ${f:-0}))
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
