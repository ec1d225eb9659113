#!/usr/bin/env bash
# cross.test.sh — cross-scoring (--cross-score, cross.tsv) and sampled fork probes (--sample-temps,
# samples.tsv) end to end on stories260K (run by tests/run.sh from the repository root with $BUILD
# set; prints "N passed, N failed"):
#   - the files have one row per depth and non-reference arm (per temperature for samples.tsv);
#   - a repeated arm (f16#2) samples exactly the reference's tokens at every temperature, and its
#     cross-scores equal the reference's own; an arm whose greedy text equals the reference's has Δ = 0;
#   - the reference's score of its own text equals, to rounding, the mean NLL that a per-position
#     sweep over the document "prefix + that text" measures for the same tokens (an independent path);
#   - with both options the sampled texts are cross-scored too (cross_samples.tsv): one row per depth,
#     temperature and arm, fork as in samples.tsv, Δ = 0 for identical samples, the repeated arm's
#     scores the reference's, and a forked int8 sample's score under the reference equals the
#     per-position sweep over "prefix + that sample" (independent path);
#   - killed mid-run and resumed: cross.tsv and samples.tsv byte-identical; `report` regenerates
#     README.md and summary.json byte for byte; without the options neither file is written;
#   - bad --sample-temps / --top-p are usage errors.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=$(realpath tests/fixtures/models/stories260K.gguf)
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)
need_engine   # tests/lib.sh: skip without the binaries; $T
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp
export SOURCE_DATE_EPOCH=1700000000

cat tests/fixtures/texts/*.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f32,f16,int8,f16 --depths 5 --fork 12 --max-depth 300
      --cross-score --sample-temps 0,0.5,1 --quiet)

"$DRV" sweep "${ARGS[@]}" --out "$T/a" 2> "$T/a.err"
rc=$?
check "sweep with --cross-score --sample-temps exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/a.err"
check "cross.tsv: 5 depths x 3 arms" test "$(tail -n +2 "$T/a/cross.tsv" | wc -l)" -eq 15
check "samples.tsv: 5 depths x 3 arms x 2 temperatures" test "$(tail -n +2 "$T/a/samples.tsv" | wc -l)" -eq 30
check "the repeated arm samples the reference's tokens at every depth and temperature" \
    test "$(awk -F'\t' '$2 == "f16#2" && ($7 != 1 || $8 != $9)' "$T/a/samples.tsv" | wc -l)" -eq 0
check "the repeated arm's cross-scores equal the reference's own (under f16 and f32)" \
    test "$(awk -F'\t' '$2 == "f16#2" && ($6 != $7 || $8 != $9)' "$T/a/cross.tsv" | wc -l)" -eq 0
check "an identical greedy text (censored) has Δ = 0 exactly, and f32 scores are present" \
    test "$(awk -F'\t' 'NR > 1 && (($4 == 1 && $6 != $7) || $8 == "nan")' "$T/a/cross.tsv" | wc -l)" -eq 0
check "repetition rates lie in [0, 1]" \
    test "$(awk -F'\t' 'NR > 1 && ($10 < 0 || $10 > 1 || $11 < 0 || $11 > 1)' "$T/a/cross.tsv" | wc -l)" -eq 0
check "the sampled streams differ somewhere between temperatures (the seed is per depth and temperature)" \
    test "$(awk -F'\t' 'NR > 1 {print $1, $9}' "$T/a/samples.tsv" | sort -u | wc -l)" -gt 5
XS=$T/a/cross_samples.tsv
check "cross_samples.tsv: 5 depths x 3 arms x 2 temperatures" test "$(tail -n +2 "$XS" | wc -l)" -eq 30
check "... its fork and censored columns are samples.tsv's, row for row" \
    test "$(awk -F'\t' 'NR > 1 {print $1, $2, $3 + 0, $4, $5}' "$XS" | sort)" = \
         "$(awk -F'\t' 'NR > 1 {print $1, $2, $3 + 0, $6, $7}' "$T/a/samples.tsv" | sort)"
check "... identical samples (censored) have Δ = 0 exactly; the repeated arm's scores are the reference's; f32 scores present" \
    test "$(awk -F'\t' 'NR > 1 && (($5 == 1 && ($7 != $8 || $9 != $10)) || ($2 == "f16#2" && $5 != 1) || $9 == "nan")' "$XS" | wc -l)" -eq 0
check "... some sampled int8 text forked and was scored differently from the reference's sample" \
    test "$(awk -F'\t' '$2 == "int8" && $5 == 0 && $7 != $8' "$XS" | wc -l)" -gt 0

# A text rescored on an independent path: rescore D TEXT NAME prints the mean NLL that a per-position
# sweep over "the document's first D tokens + TEXT" (arms f16, f32) measures for TEXT's tokens: its
# nll_ref at positions D-1 .. D+fork_n-2 (12 tokens) are those tokens' NLLs under the reference
rescore() {
    { tr -s ', \n' '\n\n\n' < "$T/doc.tok" | grep -v '^$' | head -n "$1"; echo "$2" | tr ',' '\n'; } > "$T/$3.tok"
    local n; n=$(wc -l < "$T/$3.tok")
    "$DRV" sweep --model "$MODEL" --tokens-file "$T/$3.tok" --arms f16,f32 --depths 1 --fork 1 --per-position \
        --max-depth $((n - 1)) --out "$T/$3" --quiet 2> "$T/$3.err"
    awk -F'\t' -v lo=$(($1 - 1)) -v hi=$(($1 + 10)) 'NR > 1 && $1 >= lo && $1 <= hi {s += $8; k++} END {printf "%.17g", s / k}' \
        "$T/$3/positions.tsv"
}
same_nll() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a - b < 1e-12 && b - a < 1e-12 && a > 0)}'; }
# the reference's own greedy text at the first depth (its score in cross.tsv)
d=$(awk -F'\t' 'NR == 2 {print $1}' "$T/a/forks.tsv")
text=$(awk -F'\t' 'NR == 2 {print $6}' "$T/a/forks.tsv")
own=$(awk -F'\t' -v d="$d" '$1 == d && $2 == "int8" {print $7}' "$T/a/cross.tsv")
pp=$(rescore "$d" "$text" pp)
check "the reference's score of its own text ($own) equals the per-position sweep's mean NLL ($pp)" same_nll "$own" "$pp"
# the first forked int8 sample: its text from samples.tsv, its score under the reference from
# cross_samples.tsv
read -r d t <<< "$(awk -F'\t' '$2 == "int8" && $5 == 0 {print $1, $3; exit}' "$XS")"
text=$(awk -F'\t' -v d="$d" -v t="$t" '$1 == d && $2 == "int8" && $3 == t {print $8; exit}' "$T/a/samples.tsv")
own=$(awk -F'\t' -v d="$d" -v t="$t" '$1 == d && $2 == "int8" && $3 == t {print $7; exit}' "$XS")
pp=$(rescore "$d" "$text" pp3)
check "the reference's score of int8's sample at depth $d, T $t (${own:-none}) equals the per-position sweep's mean NLL ($pp)" \
    same_nll "$own" "$pp"

# report regenerates README.md and summary.json byte for byte; the README has both tables
cp "$T/a/README.md" "$T/README.1"; cp "$T/a/summary.json" "$T/summary.1"
"$DRV" report "$T/a" 2> /dev/null
check "report regenerates README.md and summary.json byte for byte" \
    cmp -s "$T/README.1" "$T/a/README.md" && cmp -s "$T/summary.1" "$T/a/summary.json"
check "the README has the cross-scoring, sampled-fork and sampled cross-scoring tables" \
    test "$(grep -c '^## Cross-scored continuations\|^## Sampled forks\|^## Cross-scored sampled continuations\|^| int8 | 0.5 | 5 |' "$T/a/README.md")" -eq 5
# repetition: both means, and where the texts forked the paired Δ with its words (no margin)
forked_rows=$(grep '^| int8 | [0-9]* | [1-9]' "$T/a/README.md" | head -n 1)
check "the repetition cell of a forked arm gives the paired Δ and its words: ${forked_rows:0:160}" \
    grep -Eq '; Δ [-+][0-9.]+ \[[-+][0-9.]+, [-+][0-9.]+\]: (higher|lower|no detected difference) \|$' <<<"$forked_rows"
check "summary.json has cross_scoring, sampled_forks and cross_scoring_sampled" \
    test "$(grep -c '"cross_scoring"\|"sampled_forks"\|"cross_scoring_sampled"' "$T/a/summary.json")" -eq 3

# killed mid-run (request batch 20 is in the second depth's extra probes: a depth takes a prefill,
# the greedy probe, a truncate, 2 sampled probes with their truncates, up to 4 cross-scoring pairs
# of truncate + prefill, and the final truncate) and resumed: identical files
STRATA_TEST_FAULT=die@20 "$DRV" sweep "${ARGS[@]}" --out "$T/k" 2> /dev/null
rc=$?
"$DRV" sweep --resume "$T/k" --quiet 2> "$T/k.err"
rc2=$?
same=1
for f in depths.tsv forks.tsv cross.tsv samples.tsv cross_samples.tsv summary.json; do cmp -s "$T/a/$f" "$T/k/$f" || { echo "# $f differs"; same=0; }; done
check "killed (rc $rc) and resumed (rc $rc2): cross.tsv, samples.tsv, cross_samples.tsv, depths.tsv, forks.tsv, summary.json identical" \
    test $rc -eq 137 -a $rc2 -eq 0 -a $same -eq 1

# without the options: neither file
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 4 --max-depth 100 \
    --out "$T/plain" --quiet 2> /dev/null
check "without the options no cross.tsv or samples.tsv, and the README has no such section" \
    test ! -e "$T/plain/cross.tsv" -a ! -e "$T/plain/samples.tsv" -a "$(grep -c 'Cross-scored\|Sampled forks' "$T/plain/README.md")" -eq 0
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 4 --max-depth 100 \
    --sample-temps 0.7 --out "$T/sonly" --quiet 2> /dev/null
check "--sample-temps without --cross-score: samples.tsv, no cross_samples.tsv" \
    test -s "$T/sonly/samples.tsv" -a ! -e "$T/sonly/cross_samples.tsv"

# compare shows both folders' cross-scores and sampled forks, with a dash where a folder has none
"$DRV" compare "$T/a" "$T/plain" > "$T/cmp.md" 2> "$T/cmp.err"; rc=$?
check "compare with cross.tsv and samples.tsv in (1) only: exit 0 (rc $rc); the int8 arm's table has both cross-score rows and a fork-rate row per temperature, (2) shown as not measured" \
    test $rc -eq 0 -a "$(grep -c '^| Cross-scored Δ NLL/token under the reference | [-+0-9.]* \[.*\] (.*) | — |$' "$T/cmp.md")" -eq 1 \
         -a "$(grep -c '^| Cross-scored Δ NLL/token under fp32 | ' "$T/cmp.md")" -eq 1 \
         -a "$(grep -c '^| Sampled fork rate at T = 0.5 | .*median fork.* | — |$' "$T/cmp.md")" -eq 1 \
         -a "$(grep -c '^| Sampled fork rate at T = 1 | ' "$T/cmp.md")" -eq 1
"$DRV" compare "$T/a" "$T/k" > "$T/cmp2.md" 2> /dev/null
check "compare of a run with its resumed twin: the same cross-score and fork-rate cells on both sides" \
    test "$(grep -c '^| \(Cross-scored\|Sampled fork rate\)' "$T/cmp2.md")" -ge 4 -a \
         "$(awk '/^[|] (Cross-scored|Sampled fork rate)/ { sub(/ [|]$/, ""); split($0, f, / [|] /); bad += f[2] != f[3] }
               END { print bad + 0 }' "$T/cmp2.md")" -eq 0

for bad_opt in "--sample-temps 0.5,x" "--sample-temps 0.5,0.5" "--top-p 0" "--top-p 1.5" "--seed -1"; do
    # shellcheck disable=SC2086
    "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 $bad_opt --out "$T/bad" --quiet 2> "$T/bad.err"
    rc=$?
    check "$bad_opt is a usage error (rc $rc): $(head -c 80 "$T/bad.err")" test $rc -eq 2
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
