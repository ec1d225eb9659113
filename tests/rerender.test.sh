#!/usr/bin/env bash
# rerender.test.sh — every committed results folder re-renders byte-identical from what git holds
# (issue 26 item 8; docs/DESIGN.md §4.15): for each results/*/ with a meta.json (the hand-written
# llama.cpp comparison has none and is skipped), the files git tracks there are copied out of the
# index (`git checkout-index`, so ignored files such as a 10 MB positions.tsv that a fresh clone
# lacks are not used), `strata-driver report` renders the copy, and README.md and summary.json must
# equal git's. A change to the renderer must therefore re-render and commit the folders. Every
# link of a README names a tracked file, and no .dat/.svg (which report regenerates) is tracked. Run by
# tests/run.sh from the repo root with $BUILD set; prints its own closing line "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=${DRV:-$BUILD/strata-driver}
. tests/lib.sh

if [ ! -x "$DRV" ] || ! command -v gnuplot > /dev/null || ! git rev-parse --git-dir > /dev/null 2>&1; then
    echo "skip: needs $DRV, gnuplot and a git checkout"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

n=0
for d in $(git ls-files 'results/*/meta.json' | sed 's|/meta.json$||' | sort); do
    n=$((n + 1))
    name=${d#results/}
    # the tracked files only, as a fresh clone has them
    git ls-files -z "$d" | git checkout-index -z --stdin --prefix="$T/"
    if ! "$DRV" report "$T/$d" > "$T/out" 2>&1; then
        bad "$name: report fails: $(head -c 300 "$T/out")"
        continue
    fi
    for f in README.md summary.json; do
        if git cat-file -e ":$d/$f" 2> /dev/null && git show ":$d/$f" | cmp -s - "$T/$d/$f"; then
            ok "$name: $f re-renders byte-identical"
        else
            bad "$name: $f differs from git's (re-render the folder: strata-driver report $d, and commit)"
        fi
    done
    # no link to a file that is not there (issue 26 item 8): every relative Markdown link and
    # image of the README names a file git holds in the folder
    missing=""
    for l in $(git show ":$d/README.md" 2> /dev/null | grep -o '](\([^)#:]*\))' | sed 's/^](//; s/)$//' | sort -u); do
        git ls-files --error-unmatch "$d/$l" > /dev/null 2>&1 || missing="$missing $l"
    done
    [ -z "$missing" ] && ok "$name: every link of README.md names a tracked file" ||
        bad "$name: README.md links files git does not hold:$missing"
done
[ "$n" -gt 0 ] && ok "$n committed folders checked" || bad "no committed results folder found"
# what report regenerates and no README shows is not kept in git
extra=$(git ls-files 'results/*/plots/*.dat' 'results/*/plots/*.svg' 'results/*/plots/gnuplot.log' | head -3)
[ -z "$extra" ] && ok "no .dat, .svg or gnuplot.log under results/ in git" || bad "tracked, though report regenerates them: $extra"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
