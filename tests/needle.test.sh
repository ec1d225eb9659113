#!/usr/bin/env bash
# needle.test.sh — strata-driver needle end to end on stories260K (run by tests/run.sh from the repo
# root with $BUILD set; prints its own closing line "N passed, N failed"). The tiny model retrieves
# nothing (~0 %), but the machinery must run:
#   - f16,f16: the repeated arm gives identical cells (tokens, answers, log-probs to the bit);
#   - f16,int8: the results folder (cells.tsv, meta.json, summary.json, README.md with the paired
#     statistics and "What the numbers support", heat maps in PNG and SVG);
#   - the prompts (--dump-prompts, decoded by the worker): the needle with the cell's key once, where
#     the depth puts it, the question at the end, at most L tokens; a cell alone gives the same
#     bits as inside the grid (prefix reuse is exact);
#   - resume: a cells.tsv cut short (and a line cut mid-write) is completed with the missing cells
#     only, to the same rows as an uninterrupted run; SIGINT exits 130 and keeps the cells;
#   - report re-renders byte-identical README.md and summary.json; compare works on two needle
#     folders and refuses a needle folder against a sweep folder;
#   - usage errors (--template chat without a chat template, --resume with other options);
#   - the statistics of a hand-made folder: accuracy, McNemar's b, c and p, the Δ log-prob interval,
#     the claims and the README's sentences;
#   - when SmolLM2 is in the cache: its ChatML prompt, and f16 retrieving a key at 512 tokens.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=tests/fixtures/models/stories260K.gguf
SMOL=${STRATA_CACHE:-$HOME/.cache/strata}/smollm2-135m-instruct-q4_1.gguf
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ ! -f "$MODEL" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
if ! command -v bible > /dev/null; then
    echo "skip: needs the bible-kjv package (the default corpus)"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
GRID=(--lengths 256,512 --positions 0,50,100 --trials 2 --quiet)
rows() { awk 'NR > 1' "$1" | wc -l; }
# the rows of cells.tsv for one arm, without the arm column, sorted (to compare runs and arms)
arm_rows() { awk -F'\t' -v a="$2" 'BEGIN { OFS = "\t" } NR > 1 && $6 == a { $6 = ""; print }' "$1" | LC_ALL=C sort; }

# ---- 1. f16,f16: a repeated arm gives identical cells -------------------------------------------
"$DRV" needle --model "$MODEL" --arms f16,f16 "${GRID[@]}" --out "$T/rep" 2> "$T/rep.err"
rc=$?
check "needle f16,f16 exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/rep.err"
check "cells.tsv: 12 cells x 2 arms" test "$(rows "$T/rep/cells.tsv")" -eq 24
check "f16#2's rows equal f16's: tokens, answers and log-probs to the bit" \
    test -n "$(arm_rows "$T/rep/cells.tsv" f16)" -a "$(arm_rows "$T/rep/cells.tsv" f16)" = "$(arm_rows "$T/rep/cells.tsv" 'f16#2')"
check "README: f16#2 identical to f16 in all 12 cells" grep -q 'f16#2\*\*.*identical to f16 in all 12 cells' "$T/rep/README.md"
check "no non-determinism warning" test "$(grep -c 'NOT bit-identical' "$T/rep/meta.json")" -eq 0

# ---- 2. f16,int8: the results folder ------------------------------------------------------------
R=$T/r
"$DRV" needle --model "$MODEL" --arms f16,int8 "${GRID[@]}" --out "$R" --dump-prompts "$T/prompts" 2> "$T/r.err"
rc=$?
check "needle f16,int8 exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r.err"
for f in meta.json cells.tsv summary.json README.md workers.log plots/accuracy_0.png plots/accuracy_1.svg \
         plots/diff_1.png plots/diff_1.svg; do
    check "results folder has $f" test -s "$R/$f"
done
check "meta.json: kind needle, complete, the corpus sha256" \
    test "$(grep -c -e '"kind": "needle"' -e '"complete": true' -e '"sha256": "b5c4940bcfeee072c0935b5200d0f9d88a00a0199cb0961d16133458fcdfae5d"' "$R/meta.json")" -eq 3
lay=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1] + "/meta.json"))["model"]
print(m.get("window"), m.get("layers_full_context"), m.get("n_layer"))' "$R" 2> /dev/null)
check "meta.json model: the handshake's attention layout, no window and every layer full (got $lay)" \
    test "$lay" = "0 5 5"
check "cells.tsv: header + 12 cells x 2 arms, 14 columns" \
    test "$(awk -F'\t' 'NF == 14' "$R/cells.tsv" | wc -l)" -eq 25
check "the same keys as the f16,f16 run (seeded per cell, not per arm)" \
    test "$(cut -f1-5 "$T/rep/cells.tsv" | LC_ALL=C sort -u)" = "$(cut -f1-5 "$R/cells.tsv" | LC_ALL=C sort -u)"
check "int8 differs from f16 somewhere (log-probs)" \
    test "$(arm_rows "$R/cells.tsv" f16 | cut -f9)" != "$(arm_rows "$R/cells.tsv" int8 | cut -f9)"
for s in '## Setup' '## What the numbers support' '## Accuracy' '## Paired statistics' 'Sign-flip p (Holm)' \
         'Mean Δ log-prob' '| retrieval by int8 vs f16 (raw prompts) |' '12 units on 2 haystacks' \
         '| Haystacks | trial 0 from byte '; do
    check "README.md has '$s'" grep -qF -- "$s" "$R/README.md"
done
check "summary.json: int8's sign-flip p, MDD and Δ log-prob CI" \
    test "$(grep -c -e '"signflip_p"' -e '"accuracy_mdd"' -e '"delta_logprob_mean"' "$R/summary.json")" -ge 3
check "README: no verdict says 'supported'" test "$(grep -ci 'supported' "$R/README.md")" -eq 0

# ---- 3. the prompts ------------------------------------------------------------------------------
pr_ok=0; pr_n=0
while IFS=$'\t' read -r L p t tpl key arm exact ans lp n pos gen gold gtok; do
    [ "$arm" = f16 ] || continue
    pr_n=$((pr_n + 1))
    f=$T/prompts/$tpl-L$L-p$p-t$t.tok
    head -n 1 "$f" | tr ' ' '\n' | "$WRK" --model "$MODEL" --detokenize > "$T/prompt.txt" 2> /dev/null
    ntok=$(head -n 1 "$f" | wc -w)
    text=$(cat "$T/prompt.txt")
    before=${text%%The special magic number is $key.*}
    after=${text#*The special magic number is $key.}
    good=1
    [ "$ntok" -le "$L" ] && [ "$ntok" = "$n" ] || good=0
    [ "$(grep -o "The special magic number is $key\." "$T/prompt.txt" | wc -l)" = 1 ] || good=0
    case "$text" in *"What is the special magic number mentioned in the text above? The special magic number is") ;; *) good=0 ;; esac
    # depth 0: the needle opens the haystack; 100: nothing but the question follows it
    [ "$p" = 0 ] && [ "${#before}" -gt 4 ] && good=0
    [ "$p" = 100 ] && case "$after" in $'\n'*'What is the special'*) [ "$(printf '%s' "$after" | wc -l)" -le 2 ] || good=0 ;; *) good=0 ;; esac
    # the needle follows a sentence end ('.', '!', '?', newline), or the start
    case "$before" in *[.\!\?] | *$'\n' | '<s>' | '<s> ') ;; *) good=0 ;; esac
    [ $good = 1 ] && pr_ok=$((pr_ok + 1)) || echo "# prompt $f: n $ntok/$n, before '...${before: -40}'"
done < <(awk -F'\t' 'BEGIN { OFS = "\t" } NR > 1 { for (i = 1; i <= NF; i++) if ($i == "") $i = "-"; print }' "$R/cells.tsv")
check "every prompt ($pr_ok/$pr_n): <= L tokens, the key's needle once after a sentence end, at the start for 0 %, last for 100 %, the question at the end" \
    test "$pr_ok" -eq 12 -a "$pr_n" -eq 12
grep -o 'key [0-9]* needle_pos [0-9]* first_cut [0-9]*' "$T"/prompts/raw-L512-p50-t1.tok > "$T/k.txt"
check "the dumped prompt carries the cell's key" grep -q "key $(awk -F'\t' '$1 == 512 && $2 == 50 && $3 == 1 && $6 == "f16" { print $5 }' "$R/cells.tsv") " "$T/k.txt"

# one cell alone (no prefix to reuse) gives the same bits as inside the grid
"$DRV" needle --model "$MODEL" --arms f16,int8 --lengths 512 --positions 50 --trials 2 --quiet --out "$T/one" 2> "$T/one.err"
want=$(awk -F'\t' 'NR > 1 && $1 == 512 && $2 == 50' "$R/cells.tsv" | LC_ALL=C sort)
got=$(awk 'NR > 1' "$T/one/cells.tsv" | LC_ALL=C sort)
check "a cell run alone equals the same cell inside the grid (prefix reuse is bit-exact)" test -n "$got" -a "$want" = "$got"

# ---- 4. resume ------------------------------------------------------------------------------------
cp -r "$R" "$T/cut"
head -n 9 "$R/cells.tsv" > "$T/cut/cells.tsv"             # 4 cells, ...
sed -n 10p "$R/cells.tsv" >> "$T/cut/cells.tsv"           # ... the f16 half of a 5th ...
sed -n 11p "$R/cells.tsv" | head -c 20 >> "$T/cut/cells.tsv"   # ... and a line cut mid-write
sed -i 's/"complete": true/"complete": false/' "$T/cut/meta.json"
rm -f "$T/cut/README.md"
"$DRV" needle --resume "$T/cut" 2> "$T/resume.err"
rc=$?
check "--resume exits 0 (rc $rc)" test $rc -eq 0
check "--resume: 4 of 12 cells were done" grep -q "resuming .*: 4 of 12 cells done" "$T/resume.err"
check "--resume: ran only the 8 missing cells" grep -q "8 cells to run (4 of 12 done)" "$T/resume.err"
check "--resume: the rows equal an uninterrupted run's" \
    test "$(awk 'NR > 1' "$T/cut/cells.tsv" | LC_ALL=C sort)" = "$(awk 'NR > 1' "$R/cells.tsv" | LC_ALL=C sort)"
check "--resume: meta.json complete, 2 sessions, the dropped rows noted" \
    test "$(grep -c -e '"complete": true' -e '"sessions": 2' -e 'resume dropped 1 rows of incomplete cells and 1 cut-off' "$T/cut/meta.json")" -eq 3
"$DRV" needle --resume "$T/cut" --lengths 128 > /dev/null 2> "$T/bad.err"
check "--resume with other options is a usage error (2)" test $? -eq 2

# SIGINT: exit 130, the finished cells kept, then resumed to the end
S=$T/sig
"$DRV" needle --model "$MODEL" --arms f16,int8 --lengths 512,1024 --positions 0,50,100 --trials 4 \
    --quiet --out "$S" 2> "$T/sig.err" &
dp=$!
for _ in $(seq 1 300); do
    [ -f "$S/cells.tsv" ] && [ "$(wc -l < "$S/cells.tsv")" -ge 5 ] && break
    sleep 0.1
done
kids=$(pgrep -P $dp | tr '\n' ' ')
kill -INT $dp
wait $dp
rc=$?
check "SIGINT: exit code 130 (rc $rc)" test $rc -eq 130
alive=0
for k in $kids; do kill -0 "$k" 2> /dev/null && alive=$((alive + 1)); done
check "SIGINT: no worker left" test $alive -eq 0
kept=$(rows "$S/cells.tsv")
check "SIGINT: cells.tsv keeps whole cells ($kept rows, even, < 48)" test $((kept % 2)) -eq 0 -a "$kept" -ge 4 -a "$kept" -lt 48
check "SIGINT: meta.json complete false, README says partial" \
    test "$(grep -c '"complete": false' "$S/meta.json")" -eq 1 -a "$(grep -c 'Partial results' "$S/README.md")" -eq 1
"$DRV" needle --resume "$S" --quiet 2> "$T/sig2.err"
check "SIGINT then --resume: all 24 cells x 2 arms, each once" \
    test "$(rows "$S/cells.tsv")" -eq 48 -a "$(cut -f1-4,6 "$S/cells.tsv" | sort | uniq -d | wc -l)" -eq 0

# ---- 5. report and compare ----------------------------------------------------------------------
cp "$R/README.md" "$T/readme.before"
cp "$R/summary.json" "$T/summary.before"
rm -rf "$R/README.md" "$R/summary.json" "$R/plots"
"$DRV" report "$R" 2> /dev/null
rc=$?
check "report re-renders a needle folder (rc $rc)" test $rc -eq 0 -a -s "$R/plots/diff_1.png"
check "report: README.md byte-identical to the run's" cmp -s "$R/README.md" "$T/readme.before"
check "report: summary.json byte-identical to the run's" cmp -s "$R/summary.json" "$T/summary.before"
"$DRV" compare "$R" "$T/rep" > "$T/cmp.md" 2> "$T/cmp.err"
rc=$?
check "compare two needle folders: exit 0, Markdown with both arms' accuracy" \
    test $rc -eq 0 -a "$(grep -c -e '# strata needle comparison' -e '^| f16 | raw |' "$T/cmp.md")" -eq 2
mkdir -p "$T/sweep"
"$DRV" sweep --model "$MODEL" --corpus tests/fixtures/texts --arms f16,int8 --depths 2 --max-depth 64 --fork 4 \
    --out "$T/sweep" --quiet 2> /dev/null
"$DRV" compare "$R" "$T/sweep" > /dev/null 2> "$T/cmp.err"
rc=$?
check "compare a needle folder with a sweep folder: one clear error (rc $rc)" \
    test $rc -eq 1 -a "$(grep -c 'error:.*not a needle results folder' "$T/cmp.err")" -eq 1
"$DRV" report "$T/sweep" 2> /dev/null
check "report still renders a sweep folder" test $? -eq 0

# ---- 6. usage errors and the printed plan ----------------------------------------------------------
"$DRV" needle --model "$MODEL" --template chat --out "$T/u1" > /dev/null 2> "$T/u1.err"
check "--template chat on a model without a chat template: usage error (2)" \
    test $? -eq 2 -a "$(grep -c 'error:.*no chat template' "$T/u1.err")" -eq 1
"$DRV" needle --model "$MODEL" --out "$R" > /dev/null 2> "$T/u2.err"
check "an existing results folder is refused (2), --resume suggested" \
    test $? -eq 2 -a "$(grep -c 'error:.*--resume' "$T/u2.err")" -eq 1
"$DRV" needle --model "$MODEL" --arms f16,int8 --lengths 256 --positions 50 --out "$T/u3" > /dev/null 2> "$T/u3.err"
check "the cost is printed before the run: cells (3 trials by default), tokens per arm" \
    grep -q 'needle: 2 arms; 3 cells to run.*prompt tokens.*prefilled' "$T/u3.err"
# the default trials draw their haystacks from three disjoint stretches of the corpus, recorded in
# meta.json; a rerun gives the same haystacks and the same cells byte for byte
hay() { python3 -c "import json,sys; print(' '.join('%d:%d:%d' % (h['trial'], h['offset'], h['end']) for h in json.load(open(sys.argv[1]))['plan']['haystacks']))" "$1"; }
check "default run: 3 haystacks in meta.json, trials 0-2, disjoint, different offsets ($(hay "$T/u3/meta.json"))" \
    python3 -c "
import json, sys
h = json.load(open(sys.argv[1]))['plan']['haystacks']
assert [x['trial'] for x in h] == [0, 1, 2]
assert len({x['offset'] for x in h}) == 3
s = sorted((x['offset'], x['end']) for x in h)
assert all(a[1] <= b[0] for a, b in zip(s, s[1:]))
" "$T/u3/meta.json"
check "default run: cells.tsv has trials 0, 1 and 2" \
    test "$(awk -F'\t' 'NR > 1 && $6 == "f16" { print $3 }' "$T/u3/cells.tsv" | LC_ALL=C sort -u | tr '\n' ' ')" = "0 1 2 "
"$DRV" needle --model "$MODEL" --arms f16,int8 --lengths 256 --positions 50 --out "$T/u3b" > /dev/null 2> "$T/u3b.err"
check "a rerun draws the same haystacks and writes the same cells.tsv byte for byte" \
    test "$(hay "$T/u3/meta.json")" = "$(hay "$T/u3b/meta.json")" -a -s "$T/u3b/cells.tsv" -a \
         "$(cmp -s "$T/u3/cells.tsv" "$T/u3b/cells.tsv" && echo same)" = same
check "the same seed, trials and longest length give the same haystacks whatever the depths ($T/one vs the grid)" \
    test "$(hay "$T/one/meta.json")" = "$(hay "$R/meta.json")" -a -n "$(hay "$R/meta.json")"
"$DRV" needle --model "$MODEL" --lengths 16 --out "$T/u4" > /dev/null 2> "$T/u4.err"
check "a length too short for the template and question fails with one message" \
    test $? -ne 0 -a "$(grep -c 'error:.*no room' "$T/u4.err")" -eq 1

# ---- 7. the statistics on a hand-made folder -------------------------------------------------------
# 10 cells (depths 0 and 50, 5 trials): f16 answers cells 0-7, int8 cells 0, 1 and 8, so b = 1
# (only int8), c = 6 (only f16): with one template a unit is a cell, and the sign-flip test is
# McNemar's, p = 2 (1 + 7)/2^7 = 0.125; ln p(key) -1 for f16, -1.5 for int8 in every cell: mean
# Δ = -0.5 with the interval [-0.5, -0.5]. The grid's power on 10 units (computed here by summing
# binomial terms): the smallest q with P(Bin(10, q) >= 6) >= 0.8 is 0.6732; 7 of 10 units differ, so
# the Clopper-Pearson bound solves P(Bin(10, p) <= 7) = 0.05: p = 0.9127
H=$T/hand
mkdir -p "$H"
cat > "$H/meta.json" << 'JSON'
{"kind": "needle", "tag": "hand", "ref": "f16", "templates": ["raw"], "complete": true,
 "options": {"lengths": [1024], "positions": [0, 50], "trials": 5, "keys": 1, "gen": 12, "seed": 1},
 "arms": [{"name": "f16", "kv_k": "f16", "kv_v": "f16"}, {"name": "int8", "kv_k": "int8", "kv_v": "int8"}]}
JSON
awk 'BEGIN {
    OFS = "\t"
    print "length", "position", "trial", "template", "key", "arm", "exact", "answer", "logprob", "n_prompt", \
          "needle_pos", "generated", "gold_tokens", "gen_tokens"
    for (c = 0; c < 10; c++) {
        key = 1000000 + c; p = c < 5 ? 0 : 50; t = c % 5
        for (a = 0; a < 2; a++) {
            ex = a == 0 ? (c < 8) : (c == 0 || c == 1 || c == 8)
            ans = ex ? key : 1
            print 1024, p, t, "raw", key, a ? "int8" : "f16", ex, ans, a ? -1.5 : -1, 1000, 10, " " ans ".", "1,2", "3,4"
        }
    }
}' > "$H/cells.tsv"
"$DRV" report "$H" 2> "$T/hand.err"
rc=$?
check "report renders a hand-made needle folder (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/hand.err"
jq_num() { python3 -c "import json,sys; s=json.load(open('$H/summary.json')); print($1)"; }
check "hand-made: accuracy 8/10 and 3/10" \
    test "$(jq_num "s['arms'][0]['sets']['raw']['exact'], s['arms'][1]['sets']['raw']['exact']")" = "8 3"
check "hand-made: b = 1, c = 6, 10 units, 7 differ, sign-flip p = 0.125 (= McNemar's)" \
    test "$(jq_num "(lambda v: (v['only_arm'], v['only_ref'], v['units'], v['differing_units'], round(v['signflip_p'], 12)))(s['arms'][1]['sets']['raw']['vs_ref'])")" = "(1, 6, 10, 7, 0.125)"
check "hand-made: MDD 0.6732 at 80 % power, bound 0.9127, accuracy difference -0.5" \
    test "$(jq_num "(lambda v: (round(v['accuracy_mdd'], 4), round(v['accuracy_bound'], 4), v['accuracy_diff']))(s['arms'][1]['sets']['raw']['vs_ref'])")" = "(0.6732, 0.9127, -0.5)"
check "hand-made: mean Δ log-prob -0.5 [-0.5, -0.5] over 10 cells" \
    test "$(jq_num "(lambda d: (d['est'], d['lo'], d['hi'], d['n']))(s['arms'][1]['sets']['raw']['vs_ref']['delta_logprob_mean'])")" = "(-0.5, -0.5, -0.5, 10)"
check "hand-made: Wilson interval of 3/10 is [0.1078, 0.6032]" \
    test "$(jq_num "(lambda c: (round(c['lo'], 4), round(c['hi'], 4)))(s['arms'][1]['sets']['raw']['accuracy'])")" = "(0.1078, 0.6032)"
check "hand-made: README: retrieval no detected difference (p = 0.125), with no power below 67 points ..." \
    grep -q 'retrieval \*\*no detected difference\*\* against f16: 30.0% vs 80.0% of 10 cells, 7 of 10 units on 5 haystacks differ (exact sign-flip test, Holm p = 0.125); no power at the ±5-point margin: the grid cannot detect a difference smaller than 67 points' "$H/README.md"
check "hand-made: ... but the key's log-probability is lower under int8" \
    grep -q "The key's log-probability: \*\*lower\*\*, mean Δ -0.5 \[-0.5, -0.5\] nats" "$H/README.md"
check "hand-made: claims: retrieval 'no detected difference', log-prob 'lower'; never 'supported'" \
    test "$(jq_num "[c['verdict'] for c in s['claims']]")" = "['no detected difference', 'lower']" -a \
         "$(grep -ci supported "$H/README.md")" -eq 0

# ---- 8. SmolLM2 (when cached): its chat template, and a key retrieved at 512 tokens ---------------
if [ -f "$SMOL" ]; then
    "$DRV" needle --model "$SMOL" --arms f16 --lengths 512 --positions 50 --trials 1 --quiet --out "$T/smol" \
        --dump-prompts "$T/sp" 2> "$T/smol.err"
    rc=$?
    check "SmolLM2 needle (raw and chat, 512 tokens) exits 0 (rc $rc)" test $rc -eq 0
    head -n 1 "$T/sp/chat-L512-p50-t0.tok" | tr ' ' '\n' | "$WRK" --model "$SMOL" --detokenize > "$T/chat.txt" 2> /dev/null
    check "SmolLM2 chat prompt: ChatML with the template's default system message" \
        test "$(head -n 3 "$T/chat.txt")" = "$(printf '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user')"
    check "SmolLM2 chat prompt: ends by opening the assistant turn with the answer prefix" \
        test "$(tail -n 3 "$T/chat.txt")" = "$(printf 'What is the special magic number mentioned in the text above?<|im_end|>\n<|im_start|>assistant\nThe special magic number is')"
    check "SmolLM2 chat prompt: <|im_start|> is one token (special tokens parsed), at most 512 tokens" \
        test "$(head -n 1 "$T/sp/chat-L512-p50-t0.tok" | cut -d' ' -f1 | "$WRK" --model "$SMOL" --detokenize 2> /dev/null)" = '<|im_start|>' -a \
             "$(head -n 1 "$T/sp/chat-L512-p50-t0.tok" | wc -w)" -le 512
    check "SmolLM2 f16 retrieves the key at 512 tokens, raw and chat" \
        test "$(awk -F'\t' 'NR > 1 && $7 == 1' "$T/smol/cells.tsv" | wc -l)" -eq 2
else
    echo "# $SMOL not cached: the SmolLM2 checks are skipped"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
