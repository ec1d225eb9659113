#!/usr/bin/env bash
# window.test.sh — the model's attention layout from the worker's handshake to the README (run by
# tests/run.sh from the repository root with $BUILD set; prints its own closing line
# "N passed, N failed"). For each fixture, one short sweep (arms f32, f16; 2 depths to 100 tokens):
#   - the handshake table's window row says what the model file says (tests/fixtures/README.md):
#     rand-gemma3 6 layers, window 32 in 5 of every 6 (1 full); rand-gptoss 2 layers, layer 0 a
#     16-key window (1 full); rand-llama 3 layers, none; rand-qwen35 4 layers, none (its linear-
#     attention layers carry the whole context in their state: they count as full);
#   - meta.json "model" records window and layers_full_context;
#   - the README's "Not supported by this run" says how many layers read past the window, for the
#     models that have one, and nothing for the others;
#   - a folder whose meta.json loses the two keys (a run of an older worker) re-renders without
#     the sentence.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
DRV=$BUILD/strata-driver
WRK=$BUILD/strata-worker
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)

need_engine   # tests/lib.sh: skip without the binaries; $T

# name  window  layers_full_context  n_layer  the handshake's window cell
while read -r name w full nl cell; do
    MODEL=tests/fixtures/models/$name.gguf
    cat tests/fixtures/texts/*.txt | timeout 60 "$WRK" --model "$MODEL" --tokenize > "$T/doc.tok" 2> /dev/null
    rm -rf "$T/r"
    timeout 300 "$DRV" sweep --model "$MODEL" --tokens-file "$T/doc.tok" --arms f32,f16 --ref f32 --depths 2 \
        --max-depth 100 --fork 4 --out "$T/r" > "$T/r.out" 2> "$T/r.err"
    rc=$?
    check "$name: sweep exits 0 (rc $rc)" test $rc -eq 0
    [ $rc -ne 0 ] && cat "$T/r.err"
    row=$(grep -E '^[ *] window ' "$T/r.out" "$T/r.err" | head -n 1 | sed 's/^[^:]*://')
    check "$name: the handshake table's window row says '$(echo $cell | tr _ ' ')' for both arms ($row)" \
        test "$(echo "$row" | grep -o -- "$(echo $cell | tr _ ' ')" | wc -l)" -eq 2
    got=$(python3 -c 'import json,sys
m = json.load(open(sys.argv[1] + "/meta.json"))["model"]
print(m.get("window"), m.get("layers_full_context"), m.get("n_layer"))' "$T/r" 2> /dev/null)
    check "$name: meta.json model window $w, layers_full_context $full of $nl (got $got)" test "$got" = "$w $full $nl"
    if [ "$w" -gt 0 ]; then
        s="$((nl - full)) of the $nl layers read$([ $((nl - full)) -eq 1 ] && echo s) only the last $w positions of the KV cache, so positions more than $w tokens back are read by $full layer alone: a depth effect past $w tokens is a property of that layer's reads."
        check "$name: the README says $full of $nl layers read past the window of $w" grep -qF -- "$s" "$T/r/README.md"
    else
        check "$name: no sliding window, no sentence about one" test "$(grep -c 'Sliding window' "$T/r/README.md")" -eq 0
    fi
    check "$name: summary.json verdicts.sliding_window only with a window" test "$(python3 -c 'import json,sys
print("sliding_window" in json.load(open(sys.argv[1] + "/summary.json"))["verdicts"])' "$T/r")" = "$([ "$w" -gt 0 ] && echo True || echo False)"
    if [ "$name" = rand-gemma3 ]; then   # the run of an older worker: no keys, the README as before
        python3 -c 'import json,sys
p = sys.argv[1] + "/meta.json"
m = json.load(open(p))
del m["model"]["window"], m["model"]["layers_full_context"]
json.dump(m, open(p, "w"), indent=2)' "$T/r"
        cp "$T/r/README.md" "$T/with.md"
        "$DRV" report "$T/r" > /dev/null 2> "$T/rep.err"
        check "$name: without the keys, the README loses exactly the sentence" \
            cmp -s <(python3 -c 'import re,sys
sys.stdout.write(re.sub(r" Sliding window: [^\n]*?reads\.", "", open(sys.argv[1]).read(), count=1))' "$T/with.md") \
            "$T/r/README.md"
        check "$name: ... and it was there before" test "$(grep -c 'Sliding window' "$T/with.md")" -eq 1
    fi
done << 'EOF'
rand-gemma3 32 1 6 32:_1_of_6_full
rand-gptoss 16 1 2 16:_1_of_2_full
rand-llama 0 3 3 none
rand-qwen35 0 4 4 none
EOF
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
