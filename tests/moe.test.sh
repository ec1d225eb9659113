#!/usr/bin/env bash
# moe.test.sh — a mixture-of-experts model end to end (run by tests/run.sh from the repository root
# with $BUILD set; prints its own closing line "N passed, N failed").
#
# On rand-qwen3moe (tests/fixtures/models: qwen3moe, 2 layers, 8 experts, top 2) and its Q8_0-expert
# twin, and on rand-gptoss (gpt-oss: a sliding-window layer of 16 keys with sinks, a full one, 8
# biased experts, top 2) and its MXFP4-expert twin, and on rand-qwen2moe (8 experts, top 2, and a
# shared expert), one sweep with arms f32 (the reference), f16, int8 and q4_0 (rand-qwen2moe, head
# dim 16: fp8 instead) over 3 depths, prefill requests of 37 tokens:
#   - one pass = separate runs: each arm's teacher-forced row at each depth equals a from-scratch
#     run of the worker on that prefix (default prefill chunk 512) byte for byte, and its 8 fork
#     tokens equal the worker's own greedy continuation.
# Then the routing between arms (f32 reference, a second f32, f16, q4_0; per position, 300 tokens), on
# rand-qwen3moe and on rand-gptoss:
#   - free mode: meta.json counts 600 (token, layer) decisions per arm; the repeated f32 arm never
#     differs from the reference, the q4_0 arm does;
#   - --pin-experts: no decision differs; the repeated f32 arm's rows are the reference's bit for
#     bit; the q4_0 arm's rows change;
#   - (rand-qwen3moe) the counts survive a killed driver and --resume; in pinned mode a killed worker
#     is restarted and the results are byte-identical to the uninterrupted run; summary.json carries
#     the counts;
#   - --pin-experts=FILE: a run records the reference's experts into FILE, a run with other arms
#     replays them (= the in-run pinned sweep; the reference's rows = the recording run's); a file
#     too short, of another document or of another model is refused; a killed recording resumes to
#     the same file; a dense model refuses the flag.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

need_engine   # tests/lib.sh: skip without the binaries; $T
for name in rand-qwen3moe rand-qwen3moe-q8_0 rand-gptoss rand-gptoss-mxfp4 rand-qwen2moe; do
    ARMS="f32 f16 int8 q4_0"
    [ $name = rand-qwen2moe ] && ARMS="f32 f16 int8 fp8"   # its head dim 16 takes no 32-value blocks
    MODEL=tests/fixtures/models/$name.gguf
    cat tests/fixtures/texts/*.txt | "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok"
    rm -rf "$T/r" "$T/rows"
    "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms "$(echo $ARMS | tr ' ' ',')" --ref f32 --depths 3 \
        --max-depth 300 --fork 8 --chunk 37 --out "$T/r" --dump-rows "$T/rows" --quiet 2> "$T/r.err"
    rc=$?
    check "$name: sweep over $ARMS exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -ne 0 ] && cat "$T/r.err"
    # one pass == separate from-scratch runs (tests/lib.sh)
    for a in $ARMS; do one_pass "$a" "$T/rows" "$T/r" "$name " f32; done
done

# ---- routing between arms: free mode counts, pinned mode replays the reference's experts ----------
# routing NAME DIR: "decisions differ" of an arm in DIR/meta.json
routing() {
    python3 -c 'import json,sys
m = json.load(open(sys.argv[2] + "/meta.json"))
r = [a["routing"] for a in m["arms"] if a["name"] == sys.argv[1]][0]
print(r["decisions"], r["differ"])' "$1" "$2" 2> /dev/null
}
for name in rand-gptoss rand-qwen3moe; do   # rand-qwen3moe last: the resume checks below reuse its runs
    MODEL=tests/fixtures/models/$name.gguf
    cat tests/fixtures/texts/*.txt | "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok"
    ARGS=(--model "$MODEL" --tokens-file "$T/doc.tok" --arms f32,f32,f16,q4_0 --ref f32 --depths 3 --max-depth 300
          --fork 8 --chunk 37 --per-position)
    rm -rf "$T/free" "$T/pin" "$T/free-rows" "$T/pin-rows"
    "$DRV" sweep "${ARGS[@]}" --quiet --out "$T/free" --dump-rows "$T/free-rows" 2> "$T/free.err" || cat "$T/free.err"
    mkdir -p "$T/pin-rows"
    "$DRV" sweep "${ARGS[@]}" --quiet --pin-experts --out "$T/pin" --dump-rows "$T/pin-rows" 2> "$T/pin.err" || cat "$T/pin.err"
    for a in 'f32#2' f16 q4_0; do
        read -r n d <<< "$(routing "$a" "$T/free")"
        check "$name free mode, arm $a: 300 positions x 2 layers = 600 routing decisions compared (${n:-none})" test "${n:-0}" = 600
        case $a in
            'f32#2') check "$name free mode: the repeated f32 arm chose the reference's experts at every decision (${d:-?} differ)" \
                         test "${d:-1}" = 0 ;;
            q4_0) check "$name free mode: the q4_0 KV cache changed some routing decisions (${d:-?} of 600)" test "${d:-0}" -gt 0 ;;
        esac
        read -r n d <<< "$(routing "$a" "$T/pin")"
        check "$name pinned mode, arm $a: 600 decisions, none differs from the reference's (${n:-none}, ${d:-?})" \
            test "${n:-0}" = 600 -a "${d:-1}" = 0
done
same=0
for dd in 100 200 300; do cmp -s "$T/pin-rows/f32-$dd.f32" "$T/pin-rows/f32#2-$dd.f32" && same=$((same + 1)); done
check "$name pinned mode: the arm with the reference's KV format gives the reference's rows bit for bit ($same/3 depths)" \
    test $same -eq 3
check "$name pinned mode: its per-position KL to the reference is exactly 0 everywhere" \
    awk -F'\t' 'NR > 1 && $2 == "f32#2" && $3 != 0 { bad = 1 } END { exit bad }' "$T/pin/positions.tsv"
check "$name pinned mode changes the q4_0 arm's rows (its experts are the reference's now)" \
    bash -c "! cmp -s '$T/free-rows/q4_0-100.f32' '$T/pin-rows/q4_0-100.f32'"
read -r n d <<< "$(routing q4_0 "$T/free")"
check "$name: the results README reports the free routing counts (q4_0 $d of $n)" \
    bash -c "grep -q 'Mixture of experts, free routing' '$T/free/README.md' && grep -q 'q4_0 $d of $n' '$T/free/README.md'"
check "$name: the results README of the pinned run says the experts were pinned" \
    grep -q 'Mixture of experts, experts pinned' "$T/pin/README.md"
check "$name: meta.json says pin_experts true / false" \
    bash -c "grep -q '\"pin_experts\": true' '$T/pin/meta.json' && grep -q '\"pin_experts\": false' '$T/free/meta.json'"
done

# the counts survive --resume, and a restarted worker in pinned mode rebuilds to the same bits
(STRATA_TEST_FAULT=die@9 "$DRV" sweep "${ARGS[@]}" --quiet --out "$T/free-k" > /dev/null 2>&1; true) 2> /dev/null
"$DRV" sweep --resume "$T/free-k" 2> "$T/free-k.err"
rc=$?
want=$(routing q4_0 "$T/free"); got=$(routing q4_0 "$T/free-k")
at=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["resumes"][0]["position"])' "$T/free-k/meta.json" 2> /dev/null)
check "the resumed run continued from a journalled position inside the sweep (${at:-none})" test "${at:-0}" -gt 0
check "free mode killed at request batch 9 and resumed (rc $rc): depths.tsv and the q4_0 routing counts ($got) are the uninterrupted run's ($want)" \
    bash -c "[ $rc -eq 0 ] && grep -q '\"resumes\"' '$T/free-k/meta.json' && cmp -s '$T/free/depths.tsv' '$T/free-k/depths.tsv' && [ '$want' = '$got' ] && [ -n '$want' ]"
STRATA_TEST_FAULT=kill@9:2 "$DRV" sweep "${ARGS[@]}" --pin-experts --out "$T/pin-k" 2> "$T/pin-k.err"
rc=$?
check "pinned mode: the killed worker was restarted" grep -q "restarted the worker of arm f16" "$T/pin-k.err"
check "pinned mode, the f16 worker killed at request batch 9 (rc $rc): restarted, and positions.tsv, depths.tsv are those of the uninterrupted run" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$T/pin/positions.tsv' '$T/pin-k/positions.tsv' && cmp -s '$T/pin/depths.tsv' '$T/pin-k/depths.tsv'"
[ $rc -ne 0 ] && tail -3 "$T/pin-k.err"
read -r n d <<< "$(routing q4_0 "$T/pin-k")"
check "pinned mode after the restart: 600 decisions, none differs (${n:-none}, ${d:-?})" test "${n:-0}" = 600 -a "${d:-1}" = 0
read -r n d <<< "$(routing q4_0 "$T/free")"
check "summary.json carries the routing counts of each test arm and says whether experts were pinned" \
    python3 -c 'import json,sys
s = json.load(open(sys.argv[1] + "/summary.json"))
r = [a["routing"] for a in s["arms"] if a["name"] == "q4_0"][0]
sys.exit(not (r["decisions"] == int(sys.argv[2]) and r["differ"] == int(sys.argv[3]) and s["pin_experts"] is False))' \
    "$T/free" "${n:-0}" "${d:--1}"

# ---- --pin-experts=FILE: one run records the reference's experts, later runs replay them ----------
PF=(--model "$MODEL" --tokens-file "$T/doc.tok" --ref f32 --depths 3 --max-depth 300 --fork 8 --chunk 37 --per-position --quiet)
mkdir -p "$T/rec-rows" "$T/rep-rows"
"$DRV" sweep "${PF[@]}" --arms f32,int8 --pin-experts="$T/route.pin" --out "$T/rec" --dump-rows "$T/rec-rows" 2> "$T/rec.err"
rc=$?
check "recording (--pin-experts=FILE, FILE absent): exit 0, FILE holds 300 positions x (token + 2 layers x 2 experts) after an 88-byte header, no .part left (rc $rc, $(stat -c %s "$T/route.pin" 2> /dev/null) bytes)" \
    bash -c "[ $rc -eq 0 ] && [ \"\$(stat -c %s '$T/route.pin')\" = $((88 + 300 * 20)) ] && [ ! -e '$T/route.pin.part' ]"
"$DRV" sweep "${PF[@]}" --arms f32,q4_0 --pin-experts="$T/route.pin" --out "$T/rep" --dump-rows "$T/rep-rows" 2> "$T/rep.err"
rc=$?
"$DRV" sweep "${PF[@]}" --arms f32,q4_0 --pin-experts --out "$T/inrun" 2> /dev/null
check "replaying FILE with other arms (f32, q4_0; rc $rc): depths.tsv and positions.tsv equal the in-run pinned sweep's" \
    bash -c "[ $rc -eq 0 ] && cmp -s '$T/rep/depths.tsv' '$T/inrun/depths.tsv' && cmp -s '$T/rep/positions.tsv' '$T/inrun/positions.tsv'"
same=0
for dd in 100 200 300; do cmp -s "$T/rec-rows/f32-$dd.f32" "$T/rep-rows/f32-$dd.f32" && same=$((same + 1)); done
check "... the reference arm replaying its own recorded experts gives the recording run's rows bit for bit ($same/3)" test $same -eq 3
read -r n d <<< "$(routing q4_0 "$T/rep")"
check "... every arm ran the file's experts: 600 decisions, none differs (${n:-none}, ${d:-?}); meta.json says replayed" \
    bash -c "[ '${n:-0}' = 600 ] && [ '${d:-1}' = 0 ] && grep -q '\"mode\": \"replayed\"' '$T/rep/meta.json' && grep -q '\"mode\": \"recorded\"' '$T/rec/meta.json'"
"$DRV" sweep "${PF[@]}" --max-depth 400 --arms f32,q4_0 --pin-experts="$T/route.pin" --out "$T/long" 2> "$T/long.err"
rc=$?
check "a file shorter than the sweep is refused before measuring (rc $rc: $(head -c 160 "$T/long.err"))" \
    bash -c "[ $rc -ne 0 ] && grep -q 'holds the routing of 300 positions' '$T/long.err'"
cat tests/fixtures/texts/*.txt | tac | "$WRK" --model "$MODEL" --tokenize > "$T/other.tok"
"$DRV" sweep "${PF[@]}" --tokens-file "$T/other.tok" --arms f32,q4_0 --pin-experts="$T/route.pin" --out "$T/odoc" 2> "$T/odoc.err"
rc=$?
check "a file recorded on another document is refused before measuring: no journal, no --resume hint (rc $rc: $(head -n 1 "$T/odoc.err" | head -c 160))" \
    bash -c "[ $rc -ne 0 ] && grep -q 'recorded on another document' '$T/odoc.err' && [ ! -e '$T/odoc/journal' ] && ! grep -q -- --resume '$T/odoc.err'"
"$DRV" sweep "${PF[@]}" --model tests/fixtures/models/rand-qwen3moe-q8_0.gguf --arms f32,q4_0 --pin-experts="$T/route.pin" \
    --out "$T/omod" 2> "$T/omod.err"
rc=$?
check "a file recorded on another model file is refused (rc $rc: $(head -c 160 "$T/omod.err"))" \
    bash -c "[ $rc -ne 0 ] && grep -q 'recorded on another model file' '$T/omod.err'"
# a recording killed midway (driver SIGKILLed at request batch 9) and resumed gives the same file
(STRATA_TEST_FAULT=die@9 "$DRV" sweep "${PF[@]}" --arms f32,int8 --pin-experts="$T/route2.pin" --out "$T/rec-k" \
    > /dev/null 2>&1; true) 2> /dev/null
part=$([ -e "$T/route2.pin.part" ] && [ ! -e "$T/route2.pin" ] && echo yes)
"$DRV" sweep --resume "$T/rec-k" 2> "$T/rec-k.err"
rc=$?
check "a killed recording leaves FILE.part only (${part:-no}); resumed (rc $rc), FILE equals the uninterrupted recording byte for byte" \
    bash -c "[ '$part' = yes ] && [ $rc -eq 0 ] && cmp -s '$T/route.pin' '$T/route2.pin' && cmp -s '$T/rec/depths.tsv' '$T/rec-k/depths.tsv'"

"$DRV" sweep --model tests/fixtures/models/rand-qwen3.gguf --tokens-file "$T/doc.tok" --arms f32,f16 --ref f32 \
    --depths 1 --max-depth 50 --fork 2 --pin-experts --out "$T/dense" --quiet 2> "$T/dense.err"
rc=$?
check "--pin-experts on a dense model: refused with one clear error (rc $rc: $(head -c 160 "$T/dense.err"))" \
    bash -c "[ $rc -ne 0 ] && grep -q 'pin-experts needs a mixture-of-experts model' '$T/dense.err'"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
