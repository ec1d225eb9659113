#!/usr/bin/env bash
# hybrid.test.sh — the hybrid linear-attention models end to end (run by tests/run.sh from the
# repository root with $BUILD set; prints its own closing line "N passed, N failed").
#
# On rand-qwen35 and rand-qwen35moe (tests/fixtures/models: layers 0 and 2 Gated-DeltaNet linear
# attention, 1 and 3 full attention; docs/DESIGN.md §3.1.3), one sweep with arms f32 (the
# reference), f16, int8, q4_0 and a per-layer mix naming a linear layer (int8+f16@0: ignored there)
# over 3 depths, prefill requests of 37 tokens, fork 8: every depth after the first is reached
# after a fork probe and a truncation, so the recurrent states must come back exactly:
#   - one pass = separate runs: each arm's teacher-forced row at each depth equals a from-scratch
#     run of the worker on that prefix (default prefill chunk 512) byte for byte, and its 8 fork
#     tokens equal the worker's own greedy continuation;
#   - the handshake's KV bytes per token count the two attention layers only, and its kv_layers
#     names them ("2 of 4: 1,3", in meta.json);
#   - the worker names the layers with a KV cache on stderr.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

need_engine   # tests/lib.sh: skip without the binaries; $T
ARMS="f32 f16 int8 q4_0 int8+f16@0"

for name in rand-qwen35 rand-qwen35moe; do
    MODEL=tests/fixtures/models/$name.gguf
    cat tests/fixtures/texts/*.txt | "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok"
    rm -rf "$T/r" "$T/rows"
    "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms "$(echo $ARMS | tr ' ' ',')" --ref f32 --depths 3 \
        --max-depth 300 --fork 8 --chunk 37 --out "$T/r" --dump-rows "$T/rows" --quiet 2> "$T/r.err"
    rc=$?
    check "$name: sweep over $ARMS exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -ne 0 ] && cat "$T/r.err"
    for a in $ARMS; do one_pass "$a" "$T/rows" "$T/r" "$name " f32; done   # tests/lib.sh
    check "$name: the worker names the layers with a KV cache" grep -q "KV cache in layers 1 3 (2 of 4)" "$T/w.err"
    # f32 K and V, 2 attention layers x 2 KV heads x head dim 32: 1024 bytes per token
    kvb=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1] + "/meta.json"))
print([a for a in m["arms"] if a["name"] == "f32"][0].get("kv_bytes_per_token"))' "$T/r" 2> /dev/null)
    check "$name: f32 arm's KV bytes per token = 1024 (attention layers only; got $kvb)" test "$kvb" = 1024
    kvl=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1] + "/meta.json"))
print(sorted({a.get("kv_layers") for a in m["arms"]}))' "$T/r" 2> /dev/null)
    check "$name: the handshake says which layers hold a KV cache, for every arm (meta.json kv_layers: $kvl)" \
        test "$kvl" = "['2 of 4: 1,3']"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
