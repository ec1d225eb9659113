#!/usr/bin/env bash
# kvformats.test.sh — the KV formats of issue 11 end to end (run by tests/run.sh from the repository
# root with $BUILD set; prints its own closing line "N passed, N failed").
#
# On rand-gemma3 (tests/fixtures/models: head dim 32, 6 layers, 2 KV heads, sliding-window layers
# of 32 and global ones), one sweep with an arm per new format, one with K and V in different new
# formats and one with per-layer mixes for K and V, over 3 depths, prefill requests of 37 tokens:
#   - every arm's handshake reports kv_bytes_per_token = 6 layers x 2 heads x (K row + V row) bytes,
#     the rows worked out from the layouts (hd 32: q4_1 20, q5_0 22, q5_1 24, iq4_nl 18, e5m2 32,
#     e4m3s / e5m2s 36, nvfp4 2 x 9, mxfp4 17, f16 64; the mix: K q4_1 int8 int8 int8 int8 nvfp4 =
#     20 + 4 x 34 + 18, V e5m2 e5m2 mxfp4 mxfp4 e5m2 e5m2 = 4 x 32 + 2 x 17: 2 x 336 = 672);
#   - one pass = separate runs: each arm's teacher-forced row at each depth equals a from-scratch
#     run of the worker on that prefix (default prefill chunk 512) byte for byte, and its 8 fork
#     tokens equal the worker's own greedy continuation.
# The rotation modifiers and per-KV-head mixes (kvfmt.h) the same way, in a second sweep: arms
# q4_0+rot, q8_0+roth, int8+rot, q4_0r and q4_0+roth (the same format: equal rows), tq3, tq4, q8_0+rotp
# (= q8_0+roth at this head dim: equal rows), k:q4_0+rot
# (V from the reference, f16), K and V rotated differently, and a mix per layer and KV head
# (K: head 0 f16, head 1 int8 = 6 x (64 + 34); V: q4_1+rot but layer 5 head 1 f16 = 11 x 20 + 64:
# 588 + 284 = 872 bytes per token). And KIVI arms (kivi2 / kivi4 with G and R; a per-head mix with
# kivi) the same way: bytes per token and one pass = separate runs (its fork generation, truncation
# back to the depth and continued prefill included).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=tests/fixtures/models/rand-gemma3.gguf
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

if [ ! -f "$MODEL" ] || [ ! -x "$DRV" ] || [ ! -x "$WRK" ]; then
    echo "skip: needs $MODEL, $DRV and $WRK"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

FMTS="q4_1 q5_0 q5_1 iq4_nl e5m2 e4m3s e5m2s nvfp4 mxfp4"
MIXED=iq4_nl/e4m3s                   # K iq4_nl, V e4m3s
LAYERS=int8+q4_1@0+nvfp4@-1/e5m2+mxfp4@2-3   # per-layer mixes (kv.h): K and V
LAYERS_BYTES=672
declare -A ROW=([f16]=64 [q4_1]=20 [q5_0]=22 [q5_1]=24 [iq4_nl]=18 [e5m2]=32 [e4m3s]=36 [e5m2s]=36
                [nvfp4]=18 [mxfp4]=17)

cat tests/fixtures/texts/*.txt | "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok"
ARMS="f16,$(echo $FMTS | tr ' ' ','),$MIXED,$LAYERS"
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms "$ARMS" --depths 3 --max-depth 300 --fork 8 \
    --chunk 37 --out "$T/r" --dump-rows "$T/rows" --quiet 2> "$T/r.err"
rc=$?
check "sweep over f16 and the new formats exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r.err"

# kv_bytes_per_token of each arm, from meta.json: "name": "X" ... "kv_bytes_per_token": N
awk -F'"' '/"name":/ { n = $4 } /"kv_bytes_per_token":/ { gsub(/[^0-9]/, "", $3); print n, $3 }' \
    "$T/r/meta.json" > "$T/bytes.txt"
for a in f16 $FMTS $MIXED; do
    k=${a%/*}; v=${a#*/}
    want=$(( 6 * 2 * (ROW[$k] + ROW[$v]) ))
    got=$(awk -v n="$a" '$1 == n { print $2 }' "$T/bytes.txt")
    check "arm $a: handshake kv_bytes_per_token = 12 x (${ROW[$k]} + ${ROW[$v]}) = $want (got ${got:-none})" \
        test "${got:-0}" = "$want"
done
got=$(awk -v n="$LAYERS" '$1 == n { print $2 }' "$T/bytes.txt")
check "arm $LAYERS: handshake kv_bytes_per_token = $LAYERS_BYTES (got ${got:-none})" test "${got:-0}" = "$LAYERS_BYTES"

# the README's "Formats by size" table: every test arm, in increasing KV bytes, bits per value from f16's size
sizes=$(sed -n '/^## Formats by size/,/^## Plots/p' "$T/r/README.md" | awk -F' [|] ' '/^[|] / && !/^[|] Arm / { print $3 }')
n_rows=$(echo "$sizes" | grep -c .)
check "README 'Formats by size': one row per test arm ($n_rows of $(( $(wc -l < "$T/bytes.txt") - 1 ))), smallest KV first" \
    test "$n_rows" -eq "$(( $(wc -l < "$T/bytes.txt") - 1 ))" -a "$sizes" = "$(echo "$sizes" | sort -n)"
check "... nvfp4's bits per value: 16 x 18 / 64 = 4.50; and the size plot is drawn" \
    test "$(grep -c '^| nvfp4 | nvfp4 / nvfp4 | 432 | 4.50 | ' "$T/r/README.md")" -eq 1 -a -s "$T/r/plots/kl_bytes.png"

# one pass == separate from-scratch runs
for a in $FMTS $MIXED $LAYERS; do one_pass "$a" "$T/rows" "$T/r"; done   # tests/lib.sh

# ---- rotations and per-head mixes ------------------------------------------------------------------
ROTS="q4_0+rot q8_0+roth int8+rot q4_0r q4_0+roth tq3 tq4 q8_0+rotp"
ROTKV=q4_0+roth/q8_0+rot
HEADS=int8+f16@h0/q4_1+rot+f16@-1:h1
HEADS_BYTES=872
ROW[q4_0+rot]=18; ROW[q8_0+roth]=34; ROW[int8+rot]=34; ROW[q4_0r]=18; ROW[q4_0+roth]=18; ROW[q8_0+rot]=34; ROW[q8_0+rotp]=34
ROW[tq3]=$((4 + 12)); ROW[tq4]=$((4 + 16))   # f32 s + 32 codes of 3 / 4 bits
ARMS2="f16,$(echo $ROTS | tr ' ' ','),k:q4_0+rot,$ROTKV,$HEADS"
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms "$ARMS2" --depths 3 --max-depth 300 --fork 8 \
    --chunk 37 --out "$T/r2" --dump-rows "$T/rows2" --quiet 2> "$T/r2.err"
rc=$?
check "sweep over the rotated formats and a per-head mix exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r2.err"
awk -F'"' '/"name":/ { n = $4 } /"kv_bytes_per_token":/ { gsub(/[^0-9]/, "", $3); print n, $3 }' \
    "$T/r2/meta.json" > "$T/bytes2.txt"
for a in $ROTS $ROTKV k:q4_0+rot; do
    case $a in k:*) k=${a#k:}; v=f16 ;; *) k=${a%/*}; v=${a#*/} ;; esac
    want=$(( 6 * 2 * (ROW[$k] + ROW[$v]) ))
    got=$(awk -v n="$a" '$1 == n { print $2 }' "$T/bytes2.txt")
    check "arm $a: handshake kv_bytes_per_token = 12 x (${ROW[$k]} + ${ROW[$v]}) = $want (got ${got:-none})" \
        test "${got:-0}" = "$want"
done
got=$(awk -v n="$HEADS" '$1 == n { print $2 }' "$T/bytes2.txt")
check "arm $HEADS: handshake kv_bytes_per_token = $HEADS_BYTES (got ${got:-none})" test "${got:-0}" = "$HEADS_BYTES"
same=0
for d in 100 200 300; do cmp -s "$T/rows2/q4_0r-$d.f32" "$T/rows2/q4_0+roth-$d.f32" && same=$((same + 1)); done
check "q4_0r and q4_0+roth (one format, two names): the same rows at the 3 depths ($same/3)" test $same -eq 3
same=0
for d in 100 200 300; do cmp -s "$T/rows2/q8_0+rotp-$d.f32" "$T/rows2/q8_0+roth-$d.f32" && same=$((same + 1)); done
check "q8_0+rotp = q8_0+roth at head dim 32 (one block of 32 both): the same rows at the 3 depths ($same/3)" test $same -eq 3
differ=0
for d in 100 200 300; do cmp -s "$T/rows2/q4_0+rot-$d.f32" "$T/rows2/f16-$d.f32" || differ=$((differ + 1)); done
check "q4_0+rot rows differ from f16's (the format is applied) ($differ/3)" test $differ -eq 3
for a in q4_0+rot q8_0+roth int8+rot tq3 tq4 q8_0+rotp k:q4_0+rot $ROTKV $HEADS; do one_pass "$a" "$T/rows2" "$T/r2"; done

# ---- KIVI (kernels/kivi.h): groups that close inside the 300 tokens; bytes per token from the layouts
# (hd 32, 6 layers x 2 KV heads): kivi4-g16: K (16 x 32 x 4 / 8 + 128) / 16 = 24, V 16 + 4 = 20;
# kivi2-g8: K (64 + 128) / 8 = 24; kivi4 (G 32) V 20; kivi2-g16: K (128 + 128) / 16 = 16, V 8 + 4 = 12
declare -A KIVI=([kivi4-g16-r32]=$((12 * (24 + 20))) [kivi2-g8-r16/f16]=$((12 * (24 + 64)))
                 [f16/kivi4-g32-r0]=$((12 * (64 + 20))) [kivi2-g16-r16+f16@h0]=$((6 * (128 + 16 + 12))))
KARMS="kivi4-g16-r32 kivi2-g8-r16/f16 f16/kivi4-g32-r0 kivi2-g16-r16+f16@h0"
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms "f16,$(echo $KARMS | tr ' ' ',')" --depths 3 \
    --max-depth 300 --fork 8 --chunk 37 --out "$T/r3" --dump-rows "$T/rows3" --quiet 2> "$T/r3.err"
rc=$?
check "sweep over KIVI arms exits 0 (rc $rc)" test $rc -eq 0
[ $rc -ne 0 ] && cat "$T/r3.err"
awk -F'"' '/"name":/ { n = $4 } /"kv_bytes_per_token":/ { gsub(/[^0-9]/, "", $3); print n, $3 }' \
    "$T/r3/meta.json" > "$T/bytes3.txt"
for a in $KARMS; do
    got=$(awk -v n="$a" '$1 == n { print $2 }' "$T/bytes3.txt")
    check "arm $a: handshake kv_bytes_per_token = ${KIVI[$a]} (got ${got:-none})" test "${got:-0}" = "${KIVI[$a]}"
    one_pass "$a" "$T/rows3" "$T/r3"
done
differ=0
for d in 100 200 300; do cmp -s "$T/rows3/kivi4-g16-r32-$d.f32" "$T/rows3/f16-$d.f32" || differ=$((differ + 1)); done
check "kivi4-g16-r32 rows differ from f16's at the 3 depths (groups are quantised) ($differ/3)" test $differ -eq 3

# bad mixes: one clear line each, from the driver (syntax) or the worker (the model's counts)
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8+f16@h2 --depths 1 --max-depth 100 \
    --out "$T/b1" --quiet 2> "$T/b1.err"
rc=$?
check "a KV head past the model's 2 fails with one line naming it (rc $rc: $(head -c 200 "$T/b1.err"))" \
    eval '[ $rc -ne 0 ] && grep -q "KV head 2 is past the model.s 2 KV heads" "$T/b1.err" && [ $(wc -l < "$T/b1.err") -eq 1 ]'
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8+rot+roth --depths 1 --max-depth 100 \
    --out "$T/b2" --quiet 2> "$T/b2.err"
rc=$?
check "a twice-rotated format fails with one line (rc $rc: $(head -c 200 "$T/b2.err"))" \
    eval '[ $rc -ne 0 ] && grep -q "rotated already" "$T/b2.err" && [ $(wc -l < "$T/b2.err") -eq 1 ]'
"$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f16,int8@1-4+f16@0,5 --depths 1 --max-depth 100 \
    --out "$T/b3" --quiet 2> "$T/b3.err"
rc=$?
check "layers split at a comma fail with one line saying how to write them (rc $rc: $(head -c 200 "$T/b3.err"))" \
    eval '[ $rc -ne 0 ] && grep -q "f16@0+f16@29" "$T/b3.err" && [ $(wc -l < "$T/b3.err") -eq 1 ]'

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
