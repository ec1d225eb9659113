#!/usr/bin/env bash
# faults.sh — `make check-long`: fault injection at many random points of one sweep (issue 15 item 6).
# Not part of `make test` (minutes, not seconds). Prints "N passed, N failed" and a summary.
#
# The sweep: stories260K, arms f16,int8,f16, 6 depths to 480, per position, chunk 40: request 1
# syncs the arms, each depth takes 2 prefill chunks, a generate and a truncate: 25 requests. Each
# point is one run with one fault, drawn with a seeded generator (FAULT_SEED, default 15;
# FAULT_POINTS, default 100), cycling through four kinds:
#   worker  STRATA_TEST_FAULT=kill@N:A  — a worker SIGKILLed just before request N (2..25): the
#           driver reports it, starts a fresh worker and continues;
#   stop    STRATA_TEST_FAULT=stop@N:A  — a worker SIGSTOPped (hung) before request N: detected by
#           the request timeout (--request-timeout 2), restarted;
#   driver  STRATA_TEST_FAULT=die@N     — the driver SIGKILLed before request N, then --resume DIR;
#   timed   a random worker SIGKILLed from outside at a random point of the run: once the run's
#           journal has reached a random size below the clean run's, plus 0-50 ms (so during a
#           request as often as between two; a run that ended first counts, unharmed).
# Every run must exit 0 (after its resume, for driver kills) with depths.tsv, forks.tsv,
# positions.tsv and summary.json byte-identical to the uninterrupted run's.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MODEL=$(realpath tests/fixtures/models/stories260K.gguf)
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
POINTS=${FAULT_POINTS:-100}
RANDOM=${FAULT_SEED:-15}
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

T=$(mktemp -d)
cleanup() { rm -rf "$T"; }
trap cleanup EXIT
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp                   # the drivers' sockets and logs: their workers are findable
export SOURCE_DATE_EPOCH=1700000000    # every run gets the same date: summary.json compares whole

cat tests/fixtures/texts/*.txt tests/fixtures/texts/*.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,f16 --depths 6 --fork 8 --per-position
      --chunk 40 --max-depth 480 --threads 1 --quiet)
N_REQ=25
t0=$(date +%s.%N)
"$DRV" sweep "${ARGS[@]}" --out "$T/ref" 2> "$T/ref.err" || { echo "FAIL - the reference run"; echo "0 passed, 1 failed"; exit 1; }
WALL=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
JSIZE=$(stat -c %s "$T/ref/journal")
echo "# reference run: ${WALL}s, journal $JSIZE bytes; $POINTS points, seed ${FAULT_SEED:-15}"

same() {
    local f
    for f in depths.tsv forks.tsv positions.tsv summary.json; do cmp -s "$T/ref/$f" "$1/$f" || { echo "# $f differs"; return 1; }; done
}
# pids of the workers of driver $1: its children whose command line has "--listen ipc://" (not
# gnuplot, which it runs at the end), from /proc without forking per process
workers_of() { local f line rest a; for f in /proc/[0-9]*/stat; do
    { read -r line < "$f"; } 2> /dev/null || continue
    rest=${line##*) }; set -- "$1" $rest
    [ "$3" = "$1" ] || continue
    { mapfile -d '' a < "${f%/stat}/cmdline"; } 2> /dev/null || continue
    [[ " ${a[*]} " == *" --listen ipc://"* ]] && { f=${f#/proc/}; echo "${f%/stat}"; }; done; }

declare -A kinds_ok kinds_all
restarts=0; mid=0
for i in $(seq 1 "$POINTS"); do
    d=$T/p$i
    kinds=(worker stop driver timed)
    kind=${kinds[$(( (i - 1) % 4 ))]}
    N=$(( 2 + RANDOM % (N_REQ - 1) ))
    A=$(( RANDOM % 3 ))
    what=""
    rc=0
    case $kind in
    worker|stop)
        act=kill; [ $kind = stop ] && act=stop
        what="$act@$N:$A"
        STRATA_TEST_FAULT=$what "$DRV" sweep "${ARGS[@]}" --out "$d" --request-timeout 2 2> "$d.err"; rc=$?
        grep -q "test hook" "$d.err" || what="$what (hook not reached)"
        ;;
    driver)
        what="die@$N"
        { STRATA_TEST_FAULT=$what "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err"; rc=$?; } 2> /dev/null
        if [ $rc -eq 137 ]; then "$DRV" sweep --resume "$d" --quiet 2>> "$d.err"; rc=$?; what="$what + resume"; fi
        ;;
    timed)
        target=$(( (RANDOM * 32768 + RANDOM) % JSIZE ))
        delay=$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", 0.05 * r / 32768 }')
        "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err" & dp=$!
        while kill -0 $dp 2> /dev/null && [ "$(stat -c %s "$d/journal" 2> /dev/null || echo 0)" -lt $target ]; do
            sleep 0.01
        done
        sleep "$delay"
        mapfile -t pids < <(workers_of $dp)
        if [ ${#pids[@]} -gt 0 ] && kill -0 $dp 2> /dev/null; then
            victim=${pids[$(( RANDOM % ${#pids[@]} ))]}
            kill -9 "$victim" 2> /dev/null && mid=$((mid + 1))
            what="SIGKILL worker pid $victim at journal byte $target + ${delay}s"
        else
            what="at journal byte $target: the run had ended (no fault)"
        fi
        { wait $dp; rc=$?; } 2> /dev/null
        ;;
    esac
    restarts=$((restarts + $(grep -c 'WARNING: worker restarted' "$d.err")))
    kinds_all[$kind]=$(( ${kinds_all[$kind]:-0} + 1 ))
    if [ $rc -eq 0 ] && same "$d"; then
        kinds_ok[$kind]=$(( ${kinds_ok[$kind]:-0} + 1 ))
        ok "point $i ($kind: $what): exit 0, results byte-identical"
    else
        bad "point $i ($kind: $what): rc $rc; $(tail -n 2 "$d.err" | tr '\n' ' ')"
    fi
    rm -rf "$d"
done
for k in worker stop driver timed; do
    echo "# $k: ${kinds_ok[$k]:-0} of ${kinds_all[$k]:-0} identical"
done
echo "# timed kills that hit a running worker: $mid; worker restarts reported: $restarts"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
