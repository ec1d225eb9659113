#!/usr/bin/env bash
# layers.test.sh — the include arrows of docs/DESIGN.md §1.1, read from the sources (run by
# tests/run.sh from the repo root; prints its own closing line "N passed, N failed"):
#   - kernels/ includes nothing outside kernels/;
#   - proto/ includes nothing but proto/ and the two floor headers kernels/errmsg.h, kernels/clock.h;
#   - worker/ includes nothing from driver/; driver/ nothing from worker/;
#   - driver/'s own files (arm, cli, document, journal, passages, pinfile, run, stats, workers)
#     include nothing from its subfolders (sweep/, needle/, report/): only driver/main.c, the CLI,
#     sits above them;
#   - sweep/ and report/ include nothing from needle/'s command (needle.c's header is the needle
#     folder's format, needle/needle.h, which report/ reads); report/ nothing from sweep/;
#   - every quoted include names a file that exists (root-relative paths, no ../).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh

# incs FILES...: "file:included" for every #include "..." line of FILES
incs() { grep -Ho '^#include "[^"]*"' "$@" 2>/dev/null | sed 's/:#include "/:/; s/"$//'; }
# none WHAT PATTERN FILES...: ok when no quoted include of FILES matches PATTERN (ERE)
none() {
    local what=$1 pat=$2; shift 2
    local hits
    hits=$(incs "$@" | awk -F: -v p="$pat" '$2 ~ p' | head -5)
    if [ -z "$hits" ]; then ok "$what"; else bad "$what: $(tr '\n' ' ' <<<"$hits")"; fi
}

none "kernels/ includes nothing outside kernels/" '^(driver|proto|worker)/' $(find kernels -name '*.[ch]')
none "proto/ includes only proto/ and kernels/errmsg.h, kernels/clock.h" \
    '^(driver|worker)/|^kernels/([^ec]|e[^r]|c[^l])' proto/*.[ch]
none "worker/ includes nothing from driver/" '^driver/' worker/*.[ch]
none "driver/ includes nothing from worker/" '^worker/' $(find driver -name '*.[ch]')
core=$(ls driver/*.[ch] | grep -v '^driver/main\.c$')
none "driver/'s own modules include none of its subfolders" '^driver/[a-z]+/' $core
none "sweep/ includes nothing from needle/" '^driver/needle/' driver/sweep/*.[ch]
none "report/ includes nothing from sweep/" '^driver/sweep/' driver/report/*.[ch]
none "report/ reads needle/ only through needle/needle.h" '^driver/needle/[^n]|^driver/needle/needle_' driver/report/*.[ch]
none "needle/ includes nothing from sweep/" '^driver/sweep/' driver/needle/*.[ch]
# the subfolders exist and hold the files the layout names (a move that dropped one would fail here)
for d in sweep needle report; do
    check "driver/$d/ holds its module's sources" test -n "$(ls driver/$d/$d*.c 2>/dev/null)"
done
missing=$(incs $(find driver proto worker kernels tests -maxdepth 2 -name '*.[ch]') |
    awk -F: '$2 ~ /\// { print $2 }' | sort -u | while read -r h; do [ -f "$h" ] || echo "$h"; done)
check "every root-relative include names a file that exists${missing:+ (missing: $missing)}" test -z "$missing"
check "no include climbs with ../" test -z "$(incs $(find driver proto worker kernels -name '*.[ch]') | grep -F '../')"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
