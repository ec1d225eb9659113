#!/usr/bin/env bash
# passages.test.sh — the controlled depth design (`sweep --passages N --passage-len L`,
# docs/DESIGN.md §2.8) end to end on stories260K (run by tests/run.sh from the repository root with
# $BUILD set; prints "N passed, N failed"):
#   - passages.tsv has a row per depth (the baseline and every depth), passage, position and
#     non-reference arm; the repeated f16 arm's KL is exactly 0; meta.json records the passages;
#   - one pass = separate runs: every arm's passage rows at every depth equal a from-scratch worker
#     prefill of prefix(d) + passage, byte for byte (the sweep's --dump-rows against the worker's
#     --dump-logits);
#   - killed (SIGKILL before a request batch, or with a torn journal record: in the baseline and
#     later) and resumed: passages.tsv (and the other TSVs) byte-identical to an uninterrupted run's;
#   - a document too short for the passages, and --passages with --pin-experts: one clear error;
#   - `report` renders the passages' depth section with its verdict words.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=$(realpath tests/fixtures/models/stories260K.gguf)
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh
need_engine
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp
export SOURCE_DATE_EPOCH=1700000000

cat tests/fixtures/texts/*.txt tests/fixtures/texts/*.txt > "$T/doc.txt"
"$WRK" --model "$MODEL" --tokenize < "$T/doc.txt" > "$T/doc.tok"
tr ' ,' '\n\n' < "$T/doc.tok" | grep . > "$T/ids"
NTOK=$(wc -l < "$T/ids")
# 3 depths (40, 80, 120) + the baseline (after BOS: depth 1), 4 passages of 32 tokens, 20-token
# requests (a passage is 2 requests: the chunking must not matter)
ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8,f16 --depths 3 --fork 4 --max-depth 120
      --passages 4 --passage-len 32 --chunk 20 --per-position --quiet)
V=512

# ---- 1. the run ------------------------------------------------------------------------------------
"$DRV" sweep "${ARGS[@]}" --out "$T/ref" --dump-rows "$T/rows" 2> "$T/ref.err"
rc=$?
check "sweep --passages 4 --passage-len 32 exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/ref.err"
check "passages.tsv header" test "$(head -n 1 "$T/ref/passages.tsv")" = \
    "$(printf 'depth\tpassage\tstart\ti\tarm\tkl_arm_ref\tkl_ref_arm\tjs\tsame_top1\tnll_arm\tnll_ref\tentropy_ref\tgap_ref')"
check "passages.tsv: 4 depths (1 = the baseline after BOS, 40, 80, 120) x 4 passages x 32 positions x 2 arms" \
    test "$(tail -n +2 "$T/ref/passages.tsv" | wc -l)" -eq 1024 -a \
         "$(tail -n +2 "$T/ref/passages.tsv" | cut -f1 | sort -n | uniq | tr '\n' ' ')" = "1 40 80 120 "
STARTS=$(tail -n +2 "$T/ref/passages.tsv" | awk -F'\t' '$1 == 40 && $4 == 0 && $5 == "int8" { printf "%s ", $3 }')
# S = 120 + 4, A = N - 1 - S; start_j = S + floor(j (A - 32) / 3)
WANT=$(awk -v n="$NTOK" 'BEGIN { s = 124; a = n - 1 - s; for (j = 0; j < 4; j++) printf "%d ", s + int(j * (a - 32) / 3) }')
check "passages evenly spaced beyond the deepest prefix and the fork room: $WANT(got $STARTS)" test "$STARTS" = "$WANT"
check "the repeated f16 arm: KL and JS exactly 0 at every one of its 512 passage rows" \
    test "$(awk -F'\t' '$5 == "f16#2" && $6 == "0" && $7 == "0" && $8 == "0" && $9 == "1"' "$T/ref/passages.tsv" | wc -l)" -eq 512
check "int8 differs from f16 on the passages (KL > 0 somewhere at every depth)" \
    test "$(awk -F'\t' '$5 == "int8" && $6 > 0 { d[$1] = 1 } END { print length(d) }' "$T/ref/passages.tsv")" -eq 4
check "meta.json records the passages (n, len, base_depth, starts)" \
    grep -q '"passages": {' "$T/ref/meta.json"
check "the journal's plan holds the passages (a resume with other passages is refused)" \
    grep -q '"passages":{"n":4,"len":32}' "$T/ref/journal"

# ---- 2. one pass = separate runs ---------------------------------------------------------------------
same=0; n=0
for d in 1 40 80 120; do
    j=0
    for s in $STARTS; do
        { head -n $d "$T/ids"; sed -n "$((s + 1)),$((s + 32))p" "$T/ids"; } > "$T/pp.tok"
        for kv in f16 int8; do
            "$WRK" --model "$MODEL" --kv $kv --tokens-file "$T/pp.tok" --dump-logits "$T/dump.bin" > /dev/null 2>&1
            n=$((n + 1))
            tail -c $((32 * V * 4)) "$T/dump.bin" | cmp -s - "$T/rows/$kv-p$d-$j.f32" && same=$((same + 1))
        done
        j=$((j + 1))
    done
done
check "passage rows of f16 and int8 at 4 depths x 4 passages equal from-scratch prefills of prefix + passage bit for bit ($same/$n)" \
    test $same -eq 32 -a $n -eq 32

# ---- 3. killed and resumed ---------------------------------------------------------------------------
# request batches: 1 truncate, 2 the base prefix, 3..15 the baseline's passages (per passage 2
# prefills and a truncate) and the truncate to 0; journal record 1 is the baseline, 2 a chunk, 3 depth 40
for spec in die@8 die@16 die@40 tear@1 tear@3; do
    d=$T/k-$spec
    STRATA_TEST_FAULT=$spec "$DRV" sweep "${ARGS[@]}" --out "$d" 2> "$d.err"
    rc=$?
    "$DRV" sweep --resume "$d" --quiet 2> "$d.resume.err"
    rc2=$?
    [ $rc2 -ne 0 ] && cat "$d.resume.err"
    same_all=1
    for f in passages.tsv positions.tsv depths.tsv forks.tsv; do cmp -s "$T/ref/$f" "$d/$f" || same_all=0; done
    check "$spec: killed (rc $rc), resumed (rc $rc2): passages.tsv and the other TSVs byte-identical to the clean run" \
        test $rc -eq 137 -a $rc2 -eq 0 -a $same_all -eq 1
done

# a worker killed while it scores a passage: restarted, the depth measured again, the same files
STRATA_TEST_FAULT=kill@22:1 "$DRV" sweep "${ARGS[@]}" --out "$T/kw" 2> "$T/kw.err"
rc=$?
same_all=1
for f in passages.tsv positions.tsv depths.tsv forks.tsv; do cmp -s "$T/ref/$f" "$T/kw/$f" || same_all=0; done
check "a worker killed during the passages (kill@22:1): restarted, exit 0 (rc $rc), the TSVs byte-identical" \
    test $rc -eq 0 -a $same_all -eq 1 -a "$(grep -c 'worker restarted' "$T/kw.err")" -ge 1

# ---- 4. bad input: one clear error -------------------------------------------------------------------
bad_input "a document too short for the passages" nz "the document is too short for --passages 8 --passage-len 1000" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 4 --max-depth 100 \
    --passages 8 --passage-len 1000 --out "$T/short" --quiet
bad_input "passages longer than the context allows after the deepest prefix" nz "does not fit after the deepest prefix" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 4 --max-depth 100 \
    --passages 1 --passage-len 3000 --out "$T/short3" --quiet
bad_input "a document too short for the passages (no --max-depth)" nz "the document is too short for --passages 64" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 4 \
    --passages 64 --passage-len 256 --out "$T/short2" --quiet
check "... and no results folder was started" test ! -e "$T/short/journal" -a ! -e "$T/short2/journal"
bad_input "--passages with --pin-experts" 2 "cannot be combined with --pin-experts" \
    sweep --model "$MODEL" --tokens-file "$T/doc.tok" --passages 4 --pin-experts --out "$T/pin" --quiet

# ---- 5. the report -----------------------------------------------------------------------------------
check "the README has the passages' depth section" grep -q '^## Depth from passages' "$T/ref/README.md"
check "... with a verdict for int8 over 4 passages" \
    grep -Eq 'int8.*(grows with depth|falls with depth|no detected change) \(×' "$T/ref/README.md"
check "... and the answer first takes its depth line from the passages (the controlled design decides)" \
    grep -Eq '^- \*\*Depth \(controlled design, passages.tsv\):\*\* KL:? (grows with depth|falls with depth|no detected change): the same 4 passages' "$T/ref/README.md"
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8 --depths 2 --fork 4 --max-depth 100 \
    --out "$T/plain" --quiet 2> /dev/null
check "without --passages: no passages.tsv, no passages in meta.json or the README" \
    test ! -e "$T/plain/passages.tsv" -a "$(grep -c 'passages' "$T/plain/meta.json" "$T/plain/README.md" | awk -F: '{ s += $2 } END { print s }')" -eq 0

# ---- 6. the second text: --corpus perldoc (Debian's perl-doc, sha256 checked) ---------------------------
if [ -f /usr/share/perl/5.36/pod/perlsec.pod ]; then
    "$DRV" sweep --model "$MODEL" --corpus perldoc --arms f16,int8 --depths 2 --fork 4 --max-depth 100 \
        --passages 4 --passage-len 16 --out "$T/perl" --quiet 2> "$T/perl.err"
    rc=$?
    check "--corpus perldoc --passages 4: exit 0 (rc $rc)" test $rc -eq 0
    check "... meta.json names the package, its version and the standard text's sha256, and no warning" \
        test "$(grep -c "perl-doc package (version $(dpkg-query -W -f='${Version}' perl-doc)).*sha256 of the text bd44ed266ccda99af956df64c3a9ada02380b1f769d60940e219f8cace365a52" "$T/perl/meta.json")" -eq 1 \
             -a "$(grep -c 'differs from the standard text' "$T/perl/meta.json")" -eq 0
else
    echo "skip: --corpus perldoc needs Debian's perl-doc package (make installs it)"
    skip=$((skip + 1))
fi

if [ $skip -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ $fail -eq 0 ]
