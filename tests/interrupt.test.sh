#!/usr/bin/env bash
# interrupt.test.sh — a Ctrl-C (SIGINT) that arrives while the driver waits for the truncate request
# that follows a completed depth (run by tests/run.sh from the repository root with $BUILD set;
# prints its closing line "N passed, N failed"). On stories260K, f16,int8, 3 depths, per position;
# request 1 truncates every arm to the start, then each depth takes one prefill, one generate and
# one truncate request, so requests 4 and 7 are the truncates after depths 1 and 2. STRATA_TEST_FAULT=stop@N:1 stops the int8 worker just before
# request N (the truncate then waits), and the test sends SIGINT. Then:
#   - the driver exits 130 and leaves no worker;
#   - meta.json says "interrupted" and counts exactly the depths completed before the truncate;
#   - depths.tsv, forks.tsv and positions.tsv hold exactly those depths' rows (whole lines, nothing
#     of the next depth), and `report` renders the folder;
#   - --resume finishes the run and every TSV and summary.json equals an uninterrupted run's.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FIX=tests/fixtures
MODEL=$FIX/models/stories260K.gguf
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ ! -f "$MODEL" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
DP=""
cleanup() { [ -n "$DP" ] && kill -9 "$DP" 2> /dev/null; rm -rf "$T"; }
trap cleanup EXIT
export TMPDIR=$T   # the drivers' temp dirs (sockets, logs) go here: their workers are findable
export SOURCE_DATE_EPOCH=1700000000   # every run gets the same date: summary.json compares whole

cat "$FIX"/stories260K/a.txt "$FIX"/stories260K/d.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --threads 1 --depths 3 --fork 6 --chunk 4096
      --per-position --quiet)
"$DRV" sweep "${ARGS[@]}" --out "$T/ref" 2> "$T/ref.err"
check "the uninterrupted run exits 0" test $? -eq 0
mapfile -t DEPTHS < <(awk -F'\t' 'NR > 1 { print $1 }' "$T/ref/depths.tsv")
check "it measured 3 depths (${DEPTHS[*]})" test "${#DEPTHS[@]}" -eq 3

# the drivers' temp dirs (sockets, logs) are under TMPDIR=$T: workers whose socket lies in this test's temp dirs (command lines from /proc)
workers() { local n=0 f a; for f in /proc/[0-9]*/cmdline; do
    { mapfile -d '' a < "$f"; } 2> /dev/null || continue
    [[ " ${a[*]} " == *"--listen ipc://$T/"* ]] && n=$((n + 1)); done; echo $n; }

for k in 1 2; do
    N=$((3 * k + 1))
    d=$T/int-$k
    STRATA_TEST_FAULT=stop@$N:1 "$DRV" sweep "${ARGS[@]}" --out "$d" --request-timeout 120 2> "$d.err" &
    DP=$!
    for _ in $(seq 300); do grep -q "before request $N" "$d.err" 2> /dev/null && break; sleep 0.1; done
    check "depth $k: the int8 worker was stopped before request $N (the truncate)" grep -q "stopping the worker of arm int8 before request $N" "$d.err"
    sleep 0.5
    kill -INT $DP
    wait $DP; rc=$?
    DP=""
    check "depth $k: SIGINT during the truncate: exit 130 (rc $rc)" test $rc -eq 130
    sleep 0.5
    check "depth $k: no worker left behind ($(workers))" test "$(workers)" = 0
    check "depth $k: meta.json says interrupted with $k depths done" \
        bash -c "grep -q '\"status\": \"interrupted after $k of 3 depths\"' '$d/meta.json' && grep -q '\"depths_done\": $k,' '$d/meta.json'"
    check "depth $k: depths.tsv and forks.tsv are the reference's first $k depths" \
        bash -c "cmp -s <(head -n $((k + 1)) '$T/ref/depths.tsv') '$d/depths.tsv' && cmp -s <(awk -F'\t' -v D=${DEPTHS[$((k - 1))]} 'NR == 1 || \$1 <= D' '$T/ref/forks.tsv') '$d/forks.tsv'"
    check "depth $k: positions.tsv holds positions 0..$((DEPTHS[k - 1] - 1)) exactly, as in the reference" \
        bash -c "cmp -s <(awk -F'\t' -v D=${DEPTHS[$((k - 1))]} 'NR == 1 || \$1 < D' '$T/ref/positions.tsv') '$d/positions.tsv'"
    "$DRV" report "$d" > /dev/null 2> "$d.report.err"
    check "depth $k: report renders the interrupted folder (rc $?)" grep -q 'INCOMPLETE\|incomplete\|interrupted' "$d/README.md"
    "$DRV" sweep --resume "$d" --quiet 2> "$d.resume.err"; rc=$?
    check "depth $k: --resume finishes (rc $rc)" test $rc -eq 0
    check "depth $k: after --resume, depths/forks/positions.tsv and summary.json equal the uninterrupted run's" \
        bash -c "for f in depths.tsv forks.tsv positions.tsv summary.json; do cmp -s '$T/ref/'\$f '$d/'\$f || exit 1; done"
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
