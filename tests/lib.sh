# lib.sh — sourced by every shell test (tests/*.test.sh, tests/long/faults.sh): the counters and
# ok / bad / check, which print "ok - WHAT" / "FAIL - WHAT"; each test prints its own closing line
# "N passed, N failed" (", N skipped" when it skipped something) from pass, fail and skip.
pass=0; fail=0; skip=0
# need_engine: the test needs $DRV and $WRK (set by the caller): when either is missing, prints the
# skip and the closing line and exits; otherwise makes $T, a temporary directory removed at exit
need_engine() {
    if [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
        echo "skip: needs $DRV and $WRK"
        echo "0 passed, 0 failed, 1 skipped"
        exit 0
    fi
    T=$(mktemp -d)
    trap 'rm -rf "$T"' EXIT
}
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
# one_pass ARM ROWS RUN LABEL [REF]: one pass = separate runs for one arm of a sweep over $T/doc.tok
# (uses $WRK, $MODEL and $T of the calling test): the arm's teacher-forced rows at depths 100, 200,
# 300 (the sweep's --dump-rows ROWS) and its fork tokens (RUN/forks.tsv) equal a from-scratch run of
# the worker on that prefix with --max-new 8, byte for byte. ARM: FMT (K and V), K/V, or k:FMT (V
# f16). REF: the reference arm's name (its fork tokens are every row's tokens_ref column). The
# worker's last stderr is left in $T/w.err.
one_pass() {
    local a=$1 rows=$2 run=$3 label=${4:-} ref=${5:-} k v file d want got same_rows=0 same_tok=0 n=0
    case $a in k:*) k=${a#k:}; v=f16 ;; */*) k=${a%/*}; v=${a#*/} ;; *) k=$a; v=$a ;; esac
    file=$(echo "$a" | tr '/:' '__')
    for d in 100 200 300; do
        n=$((n + 1))
        tr ' ' '\n' < "$T/doc.tok" | grep . | head -n "$d" > "$T/prefix.tok"
        "$WRK" --model "$MODEL" --kv-k "$k" --kv-v "$v" --tokens-file "$T/prefix.tok" --dump-logits "$T/dump.bin" \
            --max-new 8 > "$T/gen.txt" 2> "$T/w.err"
        tail -c $((512 * 4)) "$T/dump.bin" | cmp -s - "$rows/$file-$d.f32" && same_rows=$((same_rows + 1))
        want=$(tr ' ' ',' < "$T/gen.txt")
        got=$(awk -F'\t' -v d="$d" -v a="$a" -v r="$ref" '$1 == d && ($2 == a || a == r) { print (a == r ? $6 : $5); exit }' \
            "$run/forks.tsv")
        [ -n "$want" ] && [ "$want" = "$got" ] && same_tok=$((same_tok + 1))
    done
    check "${label}kv $a: teacher-forced rows at depths 100 200 300 equal from-scratch prefills bit for bit ($same_rows/$n)" \
        test $same_rows -eq $n
    check "${label}kv $a: fork tokens at the 3 depths equal from-scratch greedy generation ($same_tok/$n)" test $same_tok -eq $n
}
