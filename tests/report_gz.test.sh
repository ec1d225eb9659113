#!/usr/bin/env bash
# report_gz.test.sh — a results folder may keep its per-position rows compressed (positions.tsv.gz,
# passages.tsv.gz: docs/DESIGN.md §4.11), so that a folder whose rows are too big for git re-renders
# from what git holds (run by tests/run.sh from the repository root with $BUILD set; prints its own
# closing line "N passed, N failed"). On a copy of the committed main-job folder:
#   - positions.tsv replaced by positions.tsv.gz renders README.md and summary.json byte-identical
#     to the uncompressed folder's;
#   - a .gz is read through the same bounds as a plain file: one line over the line cap is one error;
#     a .gz that is a symbolic link is refused; a .gz cut short is an error, not a silent short read;
#   - with both files present the plain one is read (the .gz is only a stand-in for a missing file).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=$BUILD/strata-driver
. tests/lib.sh
pass=0; fail=0
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

SRC=$(ls -d results/*-smollm2-135m-instruct-q4_1-f32-f16-int8-f16_2 2> /dev/null | head -n 1)
if [ -z "$SRC" ] || [ ! -f "$SRC/positions.tsv" ] || ! command -v gzip > /dev/null; then
    echo "skip: needs the committed main-job folder with positions.tsv, and gzip"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
copy() { mkdir -p "$1"; for f in meta.json depths.tsv forks.tsv cross.tsv positions.tsv; do
    [ -f "$SRC/$f" ] && cp "$SRC/$f" "$1/"; done; }

copy "$T/plain"
"$DRV" report "$T/plain" > /dev/null 2> "$T/plain.err"
check "the plain folder renders (rc $?)" test -s "$T/plain/README.md"
copy "$T/gz"
gzip -9 "$T/gz/positions.tsv"
"$DRV" report "$T/gz" > /dev/null 2> "$T/gz.err"
rc=$?
check "positions.tsv.gz in place of positions.tsv renders (rc $rc: $(head -c 200 "$T/gz.err"))" test $rc -eq 0
check "... its README.md is byte-identical to the uncompressed folder's" cmp -s "$T/plain/README.md" "$T/gz/README.md"
check "... and so is summary.json" cmp -s "$T/plain/summary.json" "$T/gz/summary.json"
check "... and it read the rows (the README counts them)" grep -q 'measured ([0-9]* rows in positions.tsv)' "$T/gz/README.md"

copy "$T/long"
{ head -n 1 "$SRC/positions.tsv"; head -c 3000000 /dev/zero | tr '\0' 'a'; printf '\n'; } | gzip > "$T/long/positions.tsv.gz"
rm "$T/long/positions.tsv"
"$DRV" report "$T/long" > /dev/null 2> "$T/long.err"
rc=$?
check "a 3 MB line inside a .gz is refused with one error (rc $rc: $(head -c 200 "$T/long.err"))" \
    test $rc -ne 0 -a "$(grep -c 'error:' "$T/long.err")" -eq 1 -a -n "$(grep 'longer than' "$T/long.err")"

copy "$T/link"
gzip -c "$SRC/positions.tsv" > "$T/elsewhere.gz"
rm "$T/link/positions.tsv"
ln -s "$T/elsewhere.gz" "$T/link/positions.tsv.gz"
"$DRV" report "$T/link" > /dev/null 2> "$T/link.err"
rc=$?
check "a positions.tsv.gz that is a symbolic link is refused (rc $rc: $(head -c 200 "$T/link.err"))" \
    test $rc -ne 0 -a -n "$(grep 'symbolic link' "$T/link.err")"

copy "$T/bad"
gzip -c "$SRC/positions.tsv" | head -c 200000 > "$T/bad/positions.tsv.gz"
printf 'garbage' >> "$T/bad/positions.tsv.gz"
rm "$T/bad/positions.tsv"
"$DRV" report "$T/bad" > /dev/null 2> "$T/bad.err"
rc=$?
check "a .gz cut short (and garbage after) is a read error, not a silently shorter file (rc $rc: $(head -c 200 "$T/bad.err"))" \
    test $rc -ne 0 -a "$(grep -c 'error:' "$T/bad.err")" -eq 1

copy "$T/both"
printf 'not gzip' > "$T/both/positions.tsv.gz"
"$DRV" report "$T/both" > /dev/null 2> "$T/both.err"
check "with both present, the plain positions.tsv is read (rc $?)" cmp -s "$T/plain/README.md" "$T/both/README.md"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
