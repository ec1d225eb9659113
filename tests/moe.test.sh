#!/usr/bin/env bash
# moe.test.sh — a mixture-of-experts model end to end (run by tests/run.sh from the repository root
# with $BUILD set; prints its own closing line "N passed, N failed").
#
# On rand-qwen3moe (tests/fixtures/models: qwen3moe, 2 layers, 8 experts, top 2) and its Q8_0-expert
# twin, one sweep with arms f32 (the reference), f16, int8 and q4_0 over 3 depths, prefill requests of
# 37 tokens:
#   - one pass = separate runs: each arm's teacher-forced row at each depth equals a from-scratch
#     run of the worker on that prefix (default prefill chunk 512) byte for byte, and its 8 fork
#     tokens equal the worker's own greedy continuation.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
pass=0; fail=0
ok()  { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else bad "$d"; fi; }

if [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ARMS="f32 f16 int8 q4_0"

for name in rand-qwen3moe rand-qwen3moe-q8_0; do
    MODEL=tests/fixtures/models/$name.gguf
    cat tests/fixtures/texts/*.txt | "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok"
    rm -rf "$T/r" "$T/rows"
    "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms "$(echo $ARMS | tr ' ' ',')" --ref f32 --depths 3 \
        --max-depth 300 --fork 8 --chunk 37 --out "$T/r" --dump-rows "$T/rows" --quiet 2> "$T/r.err"
    rc=$?
    check "$name: sweep over $ARMS exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -ne 0 ] && cat "$T/r.err"
    # one pass == separate from-scratch runs
    for a in $ARMS; do
        same_rows=0; same_tok=0; n=0
        for d in 100 200 300; do
            n=$((n + 1))
            tr ' ' '\n' < "$T/doc.tok" | grep . | head -n "$d" > "$T/prefix.tok"
            "$WRK" --model "$MODEL" --kv "$a" --tokens-file "$T/prefix.tok" --dump-logits "$T/dump.bin" \
                --max-new 8 > "$T/gen.txt" 2> /dev/null
            tail -c $((512 * 4)) "$T/dump.bin" | cmp -s - "$T/rows/$a-$d.f32" && same_rows=$((same_rows + 1))
            want=$(tr ' ' ',' < "$T/gen.txt")
            # the reference arm's fork is every row's tokens_ref column
            got=$(awk -F'\t' -v d="$d" -v a="$a" '$1 == d && ($2 == a || a == "f32") { print (a == "f32" ? $6 : $5); exit }' \
                "$T/r/forks.tsv")
            [ -n "$want" ] && [ "$want" = "$got" ] && same_tok=$((same_tok + 1))
        done
        check "$name kv $a: teacher-forced rows at depths 100 200 300 equal from-scratch prefills bit for bit ($same_rows/$n)" \
            test $same_rows -eq $n
        check "$name kv $a: fork tokens at the 3 depths equal from-scratch greedy generation ($same_tok/$n)" test $same_tok -eq $n
    done
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
