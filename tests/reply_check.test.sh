#!/usr/bin/env bash
# reply_check.test.sh — what a worker says is checked, and a remote arm is what its name says
# (issue 22 F5, F7; run by tests/run.sh from the repository root with $BUILD set; prints its closing
# line "N passed, N failed"). On stories260K:
#   - F5: a remote arm behind a proxy (test_reply_check --proxy) that rewrites the second generate
#     reply's token ids to 99999,-7: the sweep stops with one error naming the arm and the id, the
#     ids reach no TSV and not the journal, `report` renders the folder, and `--resume` through an
#     honest proxy finishes it;
#   - F7: a remote arm named int8 whose worker runs f16 is refused with exit code 3 and one line
#     naming the arm, int8 and f16; with --allow-kv-mismatch it runs, and depths.tsv, meta.json and
#     README.md label it int8[ran:f16]; the same for needle (cells.tsv).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=tests/fixtures/models/stories260K.gguf
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
PROXY=$BUILD/tests/test_reply_check
. tests/lib.sh
if [ ! -f "$MODEL" ] || [ ! -x "$PROXY" ]; then
    echo "skip: needs $MODEL and $PROXY"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
need_engine
BG=""
trap 'for p in $BG; do kill $p 2> /dev/null; done; rm -rf "$T"' EXIT
cat tests/fixtures/stories260K/a.txt tests/fixtures/stories260K/d.txt > "$T/doc.txt"

# waits until FILE (a worker's or the proxy's stdout) says it listens
listening() { for _ in $(seq 100); do grep -q listening "$1" 2> /dev/null && return 0; sleep 0.1; done; return 1; }

# ---- F5: token ids out of range --------------------------------------------------------------------
"$WRK" --model "$MODEL" --kv int8 --threads 1 --listen "ipc://$T/w.ipc" > "$T/w.out" 2> "$T/w.err" &
BG="$BG $!"
listening "$T/w.out"
"$PROXY" --proxy "ipc://$T/p.ipc" "ipc://$T/w.ipc" gen-ids 2 > "$T/p.out" 2> "$T/p.err" &
pp=$!
BG="$BG $pp"
listening "$T/p.out"
R=$T/r1
"$DRV" sweep --model "$MODEL" --doc "$T/doc.txt" --arms f16 --arm "int8=ipc://$T/p.ipc" --depths 4 --fork 8 \
    --out "$R" --quiet > /dev/null 2> "$T/r1.err"
rc=$?
check "a generate reply with ids 99999,-7 stops the sweep (rc $rc)" test $rc -eq 1
check "with one error line naming the arm, the reply and the id ($(grep error: "$T/r1.err"))" \
    test "$(grep -c 'error:' "$T/r1.err")" -eq 1 -a \
    "$(grep -c 'error: arm int8: generate reply: token id 99999 at index 0 is outside the vocabulary \[0, 512)' "$T/r1.err")" -eq 1
check "the proxy did rewrite the second generate reply" grep -q "rewrote generate reply 2" "$T/p.err"
hits=$(grep -l -a -e '99999' -e ',-7' "$R"/*.tsv "$R/journal" 2> /dev/null | tr '\n' ' ')
check "the ids reached no TSV and not the journal (${hits:-none})" test -z "$hits"
check "forks.tsv keeps the depth measured before (header + 1 row)" test "$(wc -l < "$R/forks.tsv")" -eq 2
"$DRV" report "$R" > /dev/null 2> "$T/rep.err"
rc=$?
check "report renders the folder (rc $rc: $(head -c 300 "$T/rep.err"))" test $rc -eq 0
kill $pp; wait $pp 2> /dev/null
"$PROXY" --proxy "ipc://$T/p.ipc" "ipc://$T/w.ipc" pass > "$T/p2.out" 2> "$T/p2.err" &
BG="$BG $!"
listening "$T/p2.out"
"$DRV" sweep --resume "$R" --arm "int8=ipc://$T/p.ipc" --quiet > /dev/null 2> "$T/res.err"
rc=$?
check "--resume through an honest proxy finishes the sweep (rc $rc: $(grep error: "$T/res.err"))" test $rc -eq 0
check "then depths.tsv has all 4 depths" test "$(wc -l < "$R/depths.tsv")" -eq 5

# ---- F7: a remote arm whose worker runs other formats than its name -------------------------------
"$WRK" --model "$MODEL" --kv f16 --threads 1 --listen "ipc://$T/f.ipc" > "$T/f.out" 2> "$T/f.err" &
BG="$BG $!"
listening "$T/f.out"
bad_input "a remote arm named int8 whose worker runs f16 is refused" 3 \
    "remote arm int8 is named for K/V int8/int8 but its worker runs f16/f16.*--allow-kv-mismatch" \
    sweep --model "$MODEL" --doc "$T/doc.txt" --arms f16 --arm "int8=ipc://$T/f.ipc" --depths 2 --fork 4 \
    --out "$T/r2" --quiet
check "the refused run wrote no results" test ! -e "$T/r2/depths.tsv"
R=$T/r3
"$DRV" sweep --model "$MODEL" --doc "$T/doc.txt" --arms f16 --arm "int8=ipc://$T/f.ipc" --depths 2 --fork 4 \
    --allow-kv-mismatch --out "$R" --quiet > /dev/null 2> "$T/r3.err"
rc=$?
check "with --allow-kv-mismatch it runs (rc $rc: $(grep error: "$T/r3.err"))" test $rc -eq 0
check "depths.tsv labels the arm by what it ran: int8[ran:f16]" \
    test "$(awk -F'\t' 'NR > 1 { print $2 }' "$R/depths.tsv" 2> /dev/null | sort -u)" = "int8[ran:f16]"
check "meta.json: the arm is int8[ran:f16] with kv_k f16, and a warning names --allow-kv-mismatch" \
    python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); a = [x for x in m["arms"] if x["name"] == "int8[ran:f16]"]
sys.exit(not (a and a[0]["kv_k"] == "f16" and a[0]["kv_v"] == "f16" and any("--allow-kv-mismatch" in w for w in m["warnings"])))' "$R/meta.json"
check "README.md shows the label" grep -q 'int8\[ran:f16\]' "$R/README.md"
# needle: the same rule and the same label (cells.tsv)
bad_input "needle: the same remote arm is refused" 3 "remote arm int8 is named for K/V int8/int8 but its worker runs f16/f16" \
    needle --model "$MODEL" --arms f16 --arm "int8=ipc://$T/f.ipc" --lengths 512 --positions 50 --out "$T/n1" --quiet
"$DRV" needle --model "$MODEL" --arms f16 --arm "int8=ipc://$T/f.ipc" --lengths 512 --positions 50 --allow-kv-mismatch \
    --out "$T/n2" --quiet > /dev/null 2> "$T/n2.err"
rc=$?
check "needle with --allow-kv-mismatch runs (rc $rc: $(grep error: "$T/n2.err"))" test $rc -eq 0
check "needle's cells.tsv labels the arm int8[ran:f16]" grep -q 'int8\[ran:f16\]' "$T/n2/cells.tsv"
check "needle keeps --allow-kv-mismatch for --resume (meta.json options)" grep -q '"allow_kv_mismatch": true' "$T/n2/meta.json"

if [ "$skip" != 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" = 0 ]
