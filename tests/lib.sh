# lib.sh — sourced by every shell test (tests/*.test.sh, tests/long/faults.sh): the counters and
# ok / bad / check, which print "ok - WHAT" / "FAIL - WHAT"; each test prints its own closing line
# "N passed, N failed" (", N skipped" when it skipped something) from pass, fail and skip.
pass=0; fail=0; skip=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
# check WHAT CMD...: ok when CMD succeeds, else FAIL
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }
# bad_input WHAT RC REGEX ARGS...: "$DRV" ARGS fails with exit code RC ("nz": any non-zero) and exactly
# one "error:" line matching REGEX (uses $DRV and $T of the calling test)
bad_input() {
    local desc=$1 want=$2 re=$3; shift 3
    "$DRV" "$@" > /dev/null 2> "$T/bad.err"
    local rc=$? lines
    lines=$(grep -c 'error:' "$T/bad.err")
    if { [ "$want" = nz ] && [ $rc -ne 0 ]; } || [ "$want" = "$rc" ]; then
        if [ "$lines" -eq 1 ] && grep -Eq -e "$re" "$T/bad.err"; then ok "$desc (rc $rc)"; return; fi
    fi
    bad "$desc (rc $rc, $lines error lines): $(cat "$T/bad.err")"
}
