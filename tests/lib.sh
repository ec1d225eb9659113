# lib.sh — sourced by every shell test (tests/*.test.sh, tests/long/faults.sh): the counters and
# ok / bad / check, which print "ok - WHAT" / "FAIL - WHAT"; each test prints its own closing line
# "N passed, N failed" (", N skipped" when it skipped something) from pass, fail and skip.
pass=0; fail=0; skip=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
# check WHAT CMD...: ok when CMD succeeds, else FAIL
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }
