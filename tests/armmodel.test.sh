#!/usr/bin/env bash
# armmodel.test.sh — weight arms (strata-driver sweep --arm-model NAME=FILE) end to end on
# stories260K and its Q8_0 re-quantisation (tests/ref/make_weight_arm_fixture.py; run by
# tests/run.sh from the repo root with $BUILD set; prints its own closing line "N passed, N failed").
#   - f16 on the F32 model against q8 on the Q8_0 file: exit 0, the q8 arm's KL > 0 and small at
#     every depth; the handshake table marks it (weights --arm-model, model_file) with a note that
#     the arms differ in weights; meta.json's arm entry has weight_arm and its model's path and
#     sha256; the README says so; no twin warning (a different model file is another configuration);
#   - NAME:SPEC=FILE gives the weight arm SPEC's KV formats; each worker's memory check counts the
#     other arms' model files (--mem-other-weights), and nothing more without weight arms;
#   - a file with another tokenizer (same n_vocab, one score changed) is refused (exit 3) with one
#     error line naming tokenizer_hash; a missing file and bad syntax with one error line each;
#   - a run with a weight arm killed mid-sweep resumes (from another working directory, relative
#     paths) to results byte-identical to the uninterrupted run;
#   - needle takes --arm-model too, records it for --resume, and resumes to the same cells.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
FIX=tests/fixtures
MODEL=$FIX/models/stories260K.gguf
Q8=$FIX/models/stories260K-q8_0.gguf
OTHERTOK=$FIX/models/stories260K-q8_0-othertok.gguf
DRV=$PWD/$BUILD/strata-driver
WRK=$PWD/$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ ! -f "$MODEL" ] || [ ! -f "$Q8" ] || [ ! -f "$OTHERTOK" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $Q8, $OTHERTOK, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat "$FIX"/stories260K/a.txt "$FIX"/stories260K/d.txt "$FIX"/texts/*.txt > "$T/doc.txt"
ARGS=(--model "$MODEL" --arms f16 --arm-model "q8=$Q8" --doc "$T/doc.txt" --depths 4 --fork 8 --chunk 100)

# ---- 1. a weight arm ----------------------------------------------------------------------------
R=$T/r1
SOURCE_DATE_EPOCH=1700000000 "$DRV" sweep "${ARGS[@]}" --out "$R" 2> "$T/r1.err"
rc=$?
check "sweep --arms f16 --arm-model q8=stories260K-q8_0.gguf exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r1.err"
check "depths.tsv: header + 4 depths of arm q8" test "$(awk -F'\t' 'NR > 1 && $2 == "q8"' "$R/depths.tsv" | wc -l)" -eq 4
check "q8's KL(arm||ref) is > 0 and < 0.1 at every depth (Q8_0 weights move the logits a little)" \
    test "$(awk -F'\t' 'NR > 1 && $2 == "q8" && $3 + 0 > 0 && $3 + 0 < 0.1' "$R/depths.tsv" | wc -l)" -eq 4
check "the handshake table marks q8: weights --model / --arm-model" \
    grep -Eq '^\* weights +--model +--arm-model *$' "$T/r1.err"
check "the handshake table names q8's file: model_file stories260K / stories260K-q8_0" \
    grep -Eq '^\* model_file +stories260K +stories260K-q8_0 *$' "$T/r1.err"
check "model_sha256 differs in the table ('*')" grep -Eq '^\* model_sha256 ' "$T/r1.err"
check "tokenizer_hash does not (no '*')" grep -Eq '^  tokenizer_hash ' "$T/r1.err"
check "a note says q8 runs its own model and the arms differ in weights" \
    grep -q "note: arm q8 runs its own model $Q8 .*differ in weights, not only in KV" "$T/r1.err"
sha=$(sha256sum "$Q8" | cut -d' ' -f1)
meta_ok=$(python3 - "$R/meta.json" "$Q8" "$sha" << 'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
a = {x["name"]: x for x in m["arms"]}
ok = (a["q8"]["weight_arm"] is True and a["q8"]["model"]["path"] == sys.argv[2]
      and a["q8"]["model"]["sha256"] == sys.argv[3] and a["f16"]["weight_arm"] is False
      and a["f16"]["model"]["sha256"] == m["model"]["sha256"] and a["q8"]["kv_k"] == "f16")
print("yes" if ok else "no")
EOF
)
check "meta.json: q8 is a weight arm with its model's path and sha256; f16 runs the run's model" test "$meta_ok" = yes
check "README: the arms table marks q8's own weights" grep -q '^| q8 | f16 | f16 | 640 | test; own weights `stories260K-q8_0.gguf` |$' "$R/README.md"
check "README: says the arm differs in weights, not only in KV" grep -q "differs from the reference in weights, not only in KV" "$R/README.md"
check "no twin warning (f16 and q8 share the KV formats, not the model)" test "$(grep -c 'bit-identical' "$T/r1.err")" -eq 0

# NAME:SPEC=FILE: the weight arm's own KV formats
"$DRV" sweep --model "$MODEL" --arms f16 --arm-model "q8i:int8/f16=$Q8" --doc "$T/doc.txt" --depths 2 --fork 4 \
    --max-depth 200 --out "$T/r2" --quiet 2> "$T/r2.err"
rc=$?
check "--arm-model q8i:int8/f16=FILE: exit 0 (rc $rc), the arm stores K int8, V f16" \
    test $rc -eq 0 -a "$(grep -c '^| q8i | int8 | f16 | ' "$T/r2/README.md" 2> /dev/null)" = 1

# the memory check: each worker also counts the other workers' weights it does not share: mapped
# (--mmap-weights), the other model files (their page cache is not shared); copied (the default),
# every other worker's file. The worker's arguments recorded by a wrapper (--worker)
printf '#!/bin/sh\necho "$*" >> "%s"\nexec "%s" "$@"\n' "$T/argv.log" "$WRK" > "$T/wrap.sh"
chmod +x "$T/wrap.sh"
sm=$(stat -c %s "$MODEL"); sq=$(stat -c %s "$Q8")
for mode in mmap copy; do
    flag=(); [ $mode = mmap ] && flag=(--mmap-weights)
    : > "$T/argv.log"
    "$DRV" sweep --model "$MODEL" --arms f16,int8 --arm-model "q8=$Q8" --doc "$T/doc.txt" --depths 1 --fork 2 \
        --max-depth 50 --out "$T/r3$mode" --worker "$T/wrap.sh" --quiet "${flag[@]}" 2> "$T/r3.err"
    rc=$?
    if [ $mode = mmap ]; then
        check "memory check, --mmap-weights: f16 and int8 count q8's file ($sq bytes), q8 counts the model's ($sm) (rc $rc)" \
            test $rc -eq 0 -a "$(grep -c -- "--model $MODEL .*--mmap-weights --mem-other-weights $sq " "$T/argv.log")" = 2 \
            -a "$(grep -c -- "--model $Q8 .*--mmap-weights --mem-other-weights $sm " "$T/argv.log")" = 1
    else
        check "memory check, copied weights: f16 and int8 count the other two copies ($((sm + sq)) bytes), q8 two of the model ($((2 * sm))) (rc $rc)" \
            test $rc -eq 0 -a "$(grep -c -- "--model $MODEL .*--mem-other-weights $((sm + sq)) " "$T/argv.log")" = 2 \
            -a "$(grep -c -- "--model $Q8 .*--mem-other-weights $((2 * sm)) " "$T/argv.log")" = 1
    fi
    : > "$T/argv.log"
    "$DRV" sweep --model "$MODEL" --arms f16,int8 --doc "$T/doc.txt" --depths 1 --fork 2 --max-depth 50 \
        --out "$T/r4$mode" --worker "$T/wrap.sh" --quiet "${flag[@]}" 2> "$T/r4.err"
    if [ $mode = mmap ]; then
        check "... and without weight arms nothing more is counted" \
            test "$(grep -c -- "--mem-arms 2" "$T/argv.log")" = 2 -a "$(grep -c -- "--mem-other-weights" "$T/argv.log")" = 0
    else
        check "... without weight arms, the other worker's copy ($sm bytes)" \
            test "$(grep -c -- "--mem-arms 2 .*--mem-other-weights $sm " "$T/argv.log")" = 2
    fi
done

"$WRK" --model "$MODEL" --mem-other-weights 1000000000000000000 --prompt "Once" > /dev/null 2> "$T/w.err"
rc=$?
check "the worker's memory check counts --mem-other-weights (an exabyte does not fit; rc $rc)" \
    test $rc -ne 0 -a "$(grep -c "GiB of weights and scratch" "$T/w.err")" = 1

check "the depth table of a weight arm names it beside its formats (K:int8,V:f16 (q8i))" \
    grep -q '^### K:int8,V:f16 (q8i) (arm q8i)$' "$T/r2/README.md"

# ---- 2. refusals --------------------------------------------------------------------------------
bad_input "a weight arm with another tokenizer is refused, naming tokenizer_hash" 3 \
    "weight arm .*same tokenizer.*tokenizer_hash differs:.* q8=" \
    sweep --model "$MODEL" --arms f16,int8 --arm-model "q8=$OTHERTOK" --doc "$T/doc.txt" --out "$T/b1" --quiet
bad_input "a missing --arm-model file is refused" nz "--arm-model q8: model not found: $T/none.gguf" \
    sweep --model "$MODEL" --arms f16 --arm-model "q8=$T/none.gguf" --doc "$T/doc.txt" --out "$T/b2" --quiet
bad_input "a text file as --arm-model is refused" nz "--arm-model q8: .*not a GGUF" \
    sweep --model "$MODEL" --arms f16 --arm-model "q8=$T/doc.txt" --doc "$T/doc.txt" --out "$T/b3" --quiet
bad_input "--arm-model without =FILE is a usage error" 2 "needs NAME=FILE" \
    sweep --model "$MODEL" --arms f16 --arm-model q8 --doc "$T/doc.txt" --out "$T/b4" --quiet
bad_input "--arm-model NAME:SPEC=FILE with an unknown format" 2 "unknown KV format 'int9'" \
    sweep --model "$MODEL" --arms f16 --arm-model "q8:int9=$Q8" --doc "$T/doc.txt" --out "$T/b5" --quiet
bad_input "a weight arm as the reference needs its formats" 2 "reference arm 'q8' runs its own model" \
    sweep --model "$MODEL" --arms f16 --arm-model "q8=$Q8" --ref q8 --doc "$T/doc.txt" --out "$T/b6" --quiet
check "refused runs left no results folder" test ! -e "$T/b1" -a ! -e "$T/b2" -a ! -e "$T/b3"

# ---- 3. resume ----------------------------------------------------------------------------------
# killed before request batch 6, then resumed from / (the journal keeps the relative paths and the
# working directory)
d=$T/k
SOURCE_DATE_EPOCH=1700000000 STRATA_TEST_FAULT=die@6 "$DRV" sweep "${ARGS[@]}" --out "$d" --quiet 2> "$d.err"
rc=$?
check "killed mid-sweep (rc $rc)" test $rc -eq 137
(cd / && SOURCE_DATE_EPOCH=1700000000 "$DRV" sweep --resume "$d" --quiet 2> "$d.resume.err")
rc=$?
check "--resume of a run with a weight arm exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$d.resume.err"
for f in depths.tsv forks.tsv summary.json; do
    check "resumed $f is byte-identical to the uninterrupted run's" cmp -s "$R/$f" "$d/$f"
done
check "resumed meta.json still marks q8 as a weight arm" grep -q '"weight_arm": true' "$d/meta.json"

# ---- 4. needle ----------------------------------------------------------------------------------
N1=$T/n1
"$DRV" needle --model "$MODEL" --arms f16 --arm-model "q8=$Q8" --doc "$T/doc.txt" --lengths 256,512 \
    --positions 0,50 --trials 1 --quiet --out "$N1" 2> "$T/n1.err"
rc=$?
check "needle --arms f16 --arm-model q8=FILE: exit 0 (rc $rc), 4 cells per arm" \
    test $rc -eq 0 -a "$(awk -F'\t' 'NR > 1 && $6 == "q8"' "$N1/cells.tsv" 2> /dev/null | wc -l)" -eq 4
check "needle meta.json: q8 is a weight arm, its file recorded for --resume" \
    test "$(grep -c '"weight_arm": true' "$N1/meta.json")" = 1 -a "$(grep -c "\"q8=$Q8\"" "$N1/meta.json")" = 1
cp -r "$N1" "$T/n2"
head -n 5 "$N1/cells.tsv" > "$T/n2/cells.tsv"
sed -i 's/"complete": true/"complete": false/' "$T/n2/meta.json"
"$DRV" needle --resume "$T/n2" --quiet 2> "$T/n2.err"
rc=$?
check "needle --resume with a weight arm: exit 0 (rc $rc), the same cells, the note recorded once" \
    test $rc -eq 0 -a "$(cmp -s "$N1/cells.tsv" "$T/n2/cells.tsv" && echo same)" = same \
    -a "$(grep -o 'runs its own model' "$T/n2/meta.json" | wc -l)" -eq 1

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
