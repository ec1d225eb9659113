#!/usr/bin/env bash
# resume.test.sh — the journal, --resume and worker faults, end to end on stories260K (run by
# tests/run.sh from the repository root with $BUILD set; prints "N passed, N failed[, N skipped]").
#   - the driver killed (SIGKILL) at several points, and with a torn journal record, then
#     `sweep --resume`: depths.tsv, forks.tsv, positions.tsv and summary.json are byte-identical
#     to an uninterrupted run's, and so are the README's tables; no worker outlives a killed
#     driver, and its temp dir is removed by the next driver;
#   - a worker killed (SIGKILL) or stopped (SIGSTOP) mid-sweep is reported (arm, request, stderr),
#     restarted, and the results are again identical; past --max-restarts the sweep stops with
#     exit 1, renders an INCOMPLETE banner, and --resume finishes it;
#   - a full disk (a small tmpfs) and a failing fsync (an LD_PRELOAD shim): exit 1 with a clear
#     message, nothing unsynced counted as done, and --resume finishes the run identically;
#   - `report` on a folder whose positions.tsv ends in a torn line renders it as incomplete;
#   - --resume misuse: other options beside it, a folder without a journal, a folder in use, a
#     changed document.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=$(realpath tests/fixtures/models/stories260K.gguf)   # the committed fixture
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ -z "$MODEL" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
MNT=""
cleanup() {
    [ -n "$MNT" ] && umount "$MNT" 2> /dev/null
    # workers of this test only (their sockets are under $T)
    for p in $(pgrep -f "$T/tmp/strata-" 2> /dev/null); do kill -9 "$p" 2> /dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp
export SOURCE_DATE_EPOCH=1700000000   # every run gets the same date: summary.json compares whole
# ASan: a preloaded shim comes before its runtime
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0

cat tests/fixtures/texts/*.txt tests/fixtures/texts/*.txt > "$T/doc.txt"   # >= 481 tokens
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
# 6 depths of 80 tokens, 40-token chunks: 25 request batches (1 truncate, then per depth 2 prefill,
# 1 generate, 1 truncate); journal records: 0 header, then per depth a chunk and a depth record
ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,f16 --depths 6 --fork 8 --per-position
      --chunk 40 --max-depth 480 --quiet)

# ---- the reference: one uninterrupted run ----------------------------------------------------------
"$DRV" sweep "${ARGS[@]}" --out "$T/ref" 2> "$T/ref.err"
rc=$?
check "uninterrupted reference run exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/ref.err"
check "the results folder has a journal" test -s "$T/ref/journal"

# same_as_ref DIR: the raw files and summary.json byte-identical, README tables identical but for
# the wall time
same_as_ref() {
    local d=$1 f
    for f in depths.tsv forks.tsv positions.tsv summary.json; do
        cmp -s "$T/ref/$f" "$d/$f" || { echo "# $f differs"; return 1; }
    done
    diff <(grep '^|' "$T/ref/README.md" | grep -v '^| Wall time') <(grep '^|' "$d/README.md" | grep -v '^| Wall time') \
        > /dev/null || { echo "# README tables differ"; return 1; }
}
workers_of_test() { pgrep -f "$T/tmp/strata-" | wc -l; }
# a process that exists and is not a zombie (an exited worker waits a moment for its new parent)
running() { [ -r "/proc/$1/stat" ] && [ "$(sed 's/.*) //' "/proc/$1/stat" 2> /dev/null | cut -c1)" != Z ]; }

# ---- 1. the driver killed, then resumed ---------------------------------------------------------
# die@N: SIGKILL before request batch N; tear@S: journal record S written half, then SIGKILL
for spec in die@2 die@11 die@25 tear@6; do
    d=$T/k-$spec
    STRATA_TEST_FAULT=$spec "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err"
    rc=$?
    sleep 0.3
    left=$(workers_of_test)
    stale=$(ls "$T/tmp" | wc -l)
    check "$spec: the driver died of SIGKILL (rc $rc), no worker outlived it ($left left)" test $rc -eq 137 -a "$left" -eq 0
    if [ "$spec" = tear@6 ]; then
        # killed again while resuming (before its 4th request batch), then resumed again
        STRATA_TEST_FAULT=die@4 "$DRV" sweep --resume "$d" --quiet 2> "$d.resume1.err"
        rc=$?
        check "$spec: the first --resume was killed as well (rc $rc)" test $rc -eq 137
        check "$spec: it dropped the torn record" grep -q "last record was incomplete" "$d.resume1.err"
    fi
    "$DRV" sweep --resume "$d" --quiet 2> "$d.resume.err"
    rc=$?
    check "$spec: --resume exits 0 (rc $rc) and removed the killed driver's temp dir ($stale before, $(ls "$T/tmp" | wc -l) after)" \
        test $rc -eq 0 -a "$stale" -ge 1 -a -z "$(ls -A "$T/tmp")"
    [ $rc -ne 0 ] && cat "$d.resume.err"
    check "$spec: resumed results are byte-identical to the uninterrupted run" same_as_ref "$d"
done
check "tear@6: the hook wrote record 6 torn" grep -q "test hook: journal record 6 written torn" "$T/k-tear@6.err"
check "the README says the run was resumed once" grep -q "Continued with \`--resume\` 1 time" "$T/k-die@11/README.md"
check "... and twice after tear@6" grep -q "Continued with \`--resume\` 2 times" "$T/k-tear@6/README.md"
# without per-position streaming the sweep resumes at the last completed depth
NP=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 4 --fork 8 --chunk 50 --max-depth 400 --quiet)
"$DRV" sweep "${NP[@]}" --out "$T/np-ref" 2> /dev/null
STRATA_TEST_FAULT=die@12 "$DRV" sweep "${NP[@]}" --out "$T/np" 2> /dev/null
"$DRV" sweep --resume "$T/np" --quiet 2> "$T/np.err"
rc=$?
check "no --per-position: killed and resumed, exit 0 (rc $rc), depths.tsv and forks.tsv identical" \
    test $rc -eq 0 -a "$(cat "$T/np-ref/depths.tsv" "$T/np-ref/forks.tsv" | md5sum)" = "$(cat "$T/np/depths.tsv" "$T/np/forks.tsv" | md5sum)"

# an external SIGKILL mid-sweep: the workers go with the driver (PR_SET_PDEATHSIG)
STRATA_TEST_FAULT=stop@8:0 "$DRV" sweep "${ARGS[@]}" --out "$T/ext" --request-timeout 60 2> /dev/null &
dp=$!
for _ in $(seq 1 100); do [ "$(pgrep -P $dp | wc -l)" -ge 3 ] && [ -s "$T/ext/journal" ] && break; sleep 0.1; done
sleep 0.5
kids=$(pgrep -P $dp | tr '\n' ' ')
kill -9 $dp; wait $dp 2> /dev/null
sleep 0.5
alive=0
for k in $kids; do running "$k" && alive=$((alive + 1)); done
check "driver SIGKILLed mid-sweep (one worker stopped): none of its 3 workers is left ($kids)" \
    test "$(echo $kids | wc -w)" -eq 3 -a $alive -eq 0
# the killed driver's temp dir (sockets, logs) is removed by the next driver, whatever it runs
stale=$(ls "$T/tmp" | wc -l)
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 2 --max-depth 20 \
    --out "$T/small" --quiet 2> /dev/null
check "the next sweep removed the killed driver's temp dir ($stale before, $(ls "$T/tmp" | wc -l) after)" \
    test "$stale" -eq 1 -a -z "$(ls -A "$T/tmp")"

# ---- 2. `report` on what a killed driver leaves ------------------------------------------------------
d=$T/torn
STRATA_TEST_FAULT=die@11 "$DRV" sweep "${ARGS[@]}" --out "$d" 2> /dev/null
printf '170\tint8\t0.0001\t0.00' >> "$d/positions.tsv"
"$DRV" report "$d" 2> "$d.err"
rc=$?
check "report on a killed run whose positions.tsv ends in a torn line: exit 0 (rc $rc)" test $rc -eq 0
check "... and the README says INCOMPLETE RUN, the torn line and the status \"running\"" \
    grep -q 'INCOMPLETE RUN — 2 of 6 depths measured' "$d/README.md"
check "... positions past the last complete depth are not used" \
    test "$(grep -c 'incomplete line\|past the last complete depth\|"running"' "$d/README.md")" -ge 3
check "... summary.json says complete: false" grep -q '"complete": false' "$d/summary.json"

# ---- 3. worker faults -------------------------------------------------------------------------------
d=$T/wkill
STRATA_TEST_FAULT=kill@11:1 "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err"
rc=$?
check "worker int8 killed before request 11: exit 0 (rc $rc)" test $rc -eq 0
check "... reported with the arm, the signal, the request and its stderr" \
    grep -q 'arm int8: the worker (pid [0-9]*) exited (killed by signal 9.*prefill request (positions 200..239 of depth 240); its last stderr lines: strata-worker: serving' "$d.err"
check "... restarted and recorded in meta.json's warnings" grep -q 'worker restarted (1 of at most 2)' "$d/meta.json"
check "... workers.log shows the old and the new worker" grep -q 'starting a new one' "$d/workers.log"
same_as_ref "$d" && ok "... results byte-identical to the uninterrupted run" || bad "... results byte-identical to the uninterrupted run"

d=$T/wstop
start=$(date +%s)
STRATA_TEST_FAULT=stop@16:2 "$DRV" sweep "${ARGS[@]}" --out "$d" --request-timeout 2 2> "$d.err"
rc=$?
check "worker f16#2 stopped (SIGSTOP) before request 16, --request-timeout 2: exit 0 (rc $rc, $(( $(date +%s) - start )) s)" test $rc -eq 0
check "... reported as stopped, with the request" \
    grep -q 'arm f16#2: the worker (pid [0-9]*, state T: stopped) sent no reply within 2 s to a generate request' "$d.err"
same_as_ref "$d" && ok "... results byte-identical to the uninterrupted run" || bad "... results byte-identical to the uninterrupted run"

# a worker killed from outside at an arbitrary moment
d=$T/wext
"$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err" &
dp=$!
for _ in $(seq 1 200); do [ -f "$d/depths.tsv" ] && [ "$(wc -l < "$d/depths.tsv")" -ge 3 ] && break; sleep 0.05; done
victim=$(pgrep -P $dp | head -n 1)
[ -n "$victim" ] && kill -9 "$victim"
wait $dp
rc=$?
check "a worker SIGKILLed from outside mid-sweep: exit 0 (rc $rc)" test $rc -eq 0
same_as_ref "$d" && ok "... results byte-identical to the uninterrupted run" || bad "... results byte-identical to the uninterrupted run"

# more faults than --max-restarts: a clean stop, rendered as incomplete, and --resume finishes it
d=$T/wmax
STRATA_TEST_FAULT=kill@8:1,kill@12:1,kill@16:1 "$DRV" sweep "${ARGS[@]}" --out "$d" --max-restarts 2 2> "$d.err"
rc=$?
check "3 worker deaths with --max-restarts 2: exit 1 (rc $rc)" test $rc -eq 1
check "... 'giving up after 2 worker restarts' and how much was kept" \
    grep -q 'giving up after 2 worker restarts' "$d.err"
kept=$(sed -n 's/.*kept \([0-9]*\) of 6 depths.*/\1/p' "$d.err")
check "... meta.json counts the $kept depths kept, the README says INCOMPLETE RUN" \
    test -n "$kept" -a "$(grep -o '"depths_done": [0-9]*' "$d/meta.json" | grep -o '[0-9]*$')" = "$kept" -a \
    "$(grep -c "INCOMPLETE RUN — $kept of 6" "$d/README.md")" = 1
"$DRV" sweep --resume "$d" --quiet 2> /dev/null
rc=$?
check "... --resume finishes it (rc $rc) with identical results" test $rc -eq 0
same_as_ref "$d" && ok "... byte-identical after the resume" || bad "... byte-identical after the resume"

# ---- 4. write and fsync failures -----------------------------------------------------------------------
# a failing fsync of the journal (an LD_PRELOAD shim): fsync 1 is the header, 2 depth 1, 3 depth 2
if cc -shared -fPIC -o "$T/faultfs.so" tests/faultfs.c -ldl 2> "$T/cc.err"; then
    d=$T/eio
    FAULTFS_FSYNC_AT=3 LD_PRELOAD=$T/faultfs.so "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err"
    rc=$?
    check "fsync of the journal fails with EIO at depth 2: exit 1 (rc $rc), one clear error" \
        test $rc -eq 1 -a "$(grep -c 'error: cannot sync .*/journal: Input/output error' "$d.err")" = 1 ||
        sed 's/^/# /' "$d.err"
    check "... nothing unsynced counted: kept 1 depth, meta.json depths_done 1, depths.tsv holds 1 depth" \
        test "$(grep -c 'kept 1 of 6 depths' "$d.err")" = 1 -a "$(grep -c '"depths_done": 1,' "$d/meta.json")" = 1 \
             -a "$(wc -l < "$d/depths.tsv")" -eq 3
    "$DRV" sweep --resume "$d" --quiet 2> /dev/null
    same_as_ref "$d" && ok "... --resume finishes it identically" || bad "... --resume finishes it identically"
    d=$T/weio
    FAULTFS_WRITE_AT=4 LD_PRELOAD=$T/faultfs.so "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err"
    rc=$?
    check "a journal write fails with EIO: exit 1 (rc $rc), the message names the journal" \
        test $rc -eq 1 -a "$(grep -c 'error: cannot write .*/journal: Input/output error' "$d.err")" = 1
    "$DRV" sweep --resume "$d" --quiet 2> /dev/null
    same_as_ref "$d" && ok "... --resume finishes it identically" || bad "... --resume finishes it identically"
else
    bad "cannot build the fault shim: $(cat "$T/cc.err")"
fi

# a full disk: a 64 KiB tmpfs (needs root and mount; skipped otherwise)
MNT=$T/small
mkdir -p "$MNT"
if mount -t tmpfs -o size=64k tmpfs "$MNT" 2> /dev/null; then
    d=$MNT/r
    "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$T/full.err"
    rc=$?
    check "full disk: exit 1 (rc $rc) with 'No space left on device'" \
        test $rc -eq 1 -a "$(grep -c 'No space left on device' "$T/full.err")" -ge 1
    kept=$(sed -n 's/.*kept \([0-9]*\) of 6 depths.*/\1/p' "$T/full.err")
    # meta.json counts the kept depths, or (when the disk filled while rewriting it) the error says how many
    # it still counts and that the journal holds the kept ones
    metak=$(sed -n 's/.*"depths_done": \([0-9]*\),.*/\1/p' "$d/meta.json" 2> /dev/null)
    lag=$(grep -c "meta.json could not be updated and still counts ${metak:-0} depths: the journal holds $kept," \
          "$T/full.err")
    check "... the depths reported kept ($kept) are the ones meta.json counts (${metak:-none}) or the error says it lags" \
        test -n "$kept" -a \( "$metak" = "$kept" -o "$lag" = 1 \)
    check "... no temporary file is left in the results folder" test -z "$(ls -a "$d" | grep '\.tmp$')"
    mount -o remount,size=16m "$MNT"
    "$DRV" sweep --resume "$d" --quiet 2> "$T/full2.err"
    rc=$?
    check "... after space is freed, --resume exits 0 (rc $rc)" test $rc -eq 0
    same_as_ref "$d" && ok "... with identical results" || bad "... with identical results"
    umount "$MNT" && MNT=""
else
    echo "skip: cannot mount a tmpfs (not root?): the full-disk case is not tested"
    skip=$((skip + 1))
fi

# ---- 5. --resume misuse -------------------------------------------------------------------------------
"$DRV" sweep --resume "$T/ref" --arms f16,int8 > /dev/null 2> "$T/m1.err"
check "--resume with other run options: usage error 2" test $? -eq 2
"$DRV" sweep --resume "$T/tmp" > /dev/null 2> "$T/m2.err"
rc=$?
check "--resume of a folder without a journal: exit 1 naming the journal (rc $rc)" \
    test $rc -eq 1 -a "$(grep -c 'cannot resume.*journal' "$T/m2.err")" = 1
d=$T/busy
STRATA_TEST_FAULT=stop@3:0 "$DRV" sweep "${ARGS[@]}" --out "$d" --request-timeout 60 2> /dev/null &
dp=$!
for _ in $(seq 1 100); do [ -s "$d/journal" ] && break; sleep 0.1; done
"$DRV" sweep --resume "$d" > /dev/null 2> "$T/m3.err"
rc=$?
kill -9 $dp; wait $dp 2> /dev/null
check "--resume of a folder a running driver holds: refused (rc $rc), the folder is in use" \
    test $rc -eq 1 -a "$(grep -c 'in use' "$T/m3.err")" = 1
d=$T/changed
STRATA_TEST_FAULT=die@6 "$DRV" sweep "${ARGS[@]}" --out "$d" 2> /dev/null
cp "$T/doc.tok" "$T/doc.tok.orig"
sed -i '1s/^[0-9]*/7/' "$T/doc.tok"
"$DRV" sweep --resume "$d" > /dev/null 2> "$T/m4.err"
rc=$?
cp "$T/doc.tok.orig" "$T/doc.tok"
check "--resume after the document changed: refused (rc $rc), naming what differs" \
    test $rc -eq 1 -a "$(grep -c 'tokens_sha256.*differs' "$T/m4.err")" = 1

if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail -eq 0 ]
