#!/usr/bin/env bash
# verdict_cli.test.sh — the verdict options end to end on stories260K (docs/DESIGN.md §4.15; run by
# tests/run.sh from the repo root with $BUILD set; prints its own closing line "N passed, N failed"):
#   - `sweep --margin-ppl 2.5 --margin-top1 3` records meta.json "margins" and "rope_angles", and its
#     README opens with the answer, the margins "from meta.json", the RoPE mode and the model's file
#     name (not its path);
#   - `sweep --rope-angles f32` is named in the README;
#   - `report DIR --margin-ppl 5` overrides meta.json's for that render; bad margin arguments give
#     one error line and exit 2.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=tests/fixtures/models/stories260K.gguf
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh
if [ ! -f "$MODEL" ]; then
    echo "skip: needs $MODEL"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
need_engine

"$DRV" sweep --model "$MODEL" --corpus tests/fixtures/texts --arms f32,f16,int8 --depths 2 --max-depth 100 \
    --fork 4 --per-position --margin-ppl 2.5 --margin-top1 3 --out "$T/m" --quiet 2> "$T/m.err"
rc=$?
check "sweep with margins: exit 0 (rc $rc)" test $rc -eq 0
check "meta.json records the margins" python3 -c "
import json, sys
m = json.load(open('$T/m/meta.json'))
sys.exit(0 if m.get('margins') == {'ppl_pct': 2.5, 'top1_pp': 3.0} and m.get('rope_angles') == 'exact' else 1)"
check "README opens with the answer" test "$(sed -n 3p "$T/m/README.md")" = "## The answer first"
check "README: margins from meta.json" grep -q "from meta.json.*PPL ±2.5 %, top-1 agreement ±3 percentage" "$T/m/README.md"
check "README: the RoPE mode recorded (not the default's guess)" grep -q 'RoPE angles: `exact` (double precision' "$T/m/README.md"
check "README: the model by file name" grep -q 'on `stories260K.gguf` (sha256' "$T/m/README.md"
check "README: the Setup names the file, the path appears only in the Reproduce command" \
    test "$(grep -c '^| Model | `stories260K.gguf`' "$T/m/README.md")" = 1 -a "$(grep -c "$MODEL" "$T/m/README.md")" = 1
check "README: a depth-bin table from positions.tsv" grep -q "^## Depth bins" "$T/m/README.md"

"$DRV" report "$T/m" --margin-ppl 5 > /dev/null 2>&1
check "report --margin-ppl 5 overrides meta.json's 2.5" grep -q "from the command line.*PPL ±5 %, top-1 agreement ±3 percentage" "$T/m/README.md"
for args in "--margin-ppl abc" "--margin-ppl 0" "--margin-top1 100" "--margins 1" "--margin-ppl"; do
    # shellcheck disable=SC2086
    "$DRV" report "$T/m" $args > /dev/null 2> "$T/bad.err"
    rc=$?
    check "report $args: exit 2 and one error line (rc $rc)" test $rc -eq 2 -a "$(grep -c 'error' "$T/bad.err")" -le 1
done
"$DRV" sweep --model "$MODEL" --corpus tests/fixtures/texts --arms f16,int8 --depths 2 --max-depth 100 \
    --fork 4 --rope-angles f32 --out "$T/r" --quiet 2> "$T/r.err"
check "sweep --rope-angles f32: the README names it" grep -q "RoPE angles: \`f32\` (llama.cpp's f32 angles)" "$T/r/README.md"
"$DRV" sweep --model "$MODEL" --corpus tests/fixtures/texts --arms f16,int8 --margin-ppl -1 --out "$T/x" > /dev/null 2> "$T/x.err"
rc=$?
check "sweep --margin-ppl -1: exit 2 (rc $rc)" test $rc -eq 2
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
