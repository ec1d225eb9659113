#!/usr/bin/env bash
# tokenize_cli.test.sh — `strata-worker --tokenize / --detokenize` on llama.cpp's vocabulary-only
# GGUFs (tests/fixtures/tokenizer: no weights, architectures the engine does not run), run by
# tests/run.sh from the repo root with $BUILD set; prints its own closing line.
#   - every case of each llama.cpp suite (.inp/.out) tokenises to the expected ids (after the BOS
#     the model adds, if it adds one);
#   - --detokenize of those ids gives the case's text back (SPM: with the one leading space the
#     tokenizer adds);
#   - a bad id, a non-numeric input and a file that is not GGUF each fail with one error line.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
WRK=$BUILD/strata-worker
FIX=tests/fixtures/tokenizer
. tests/lib.sh   # pass, fail, skip; ok, bad, check (the working directory is the repository root)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

for v in gpt-2 llama-spm starcoder phi-3 deepseek-llm; do
    g=$FIX/ggml-vocab-$v.gguf
    # split the suite into one file per case (the text after the last separator is not a case)
    python3 - "$g.inp" "$T/$v" <<'PY'
import sys
parts = open(sys.argv[1], "rb").read().split(b"\n__ggml_vocab_test__\n")[:-1]
for i, p in enumerate(parts):
    open("%s.%03d.txt" % (sys.argv[2], i), "wb").write(p)
PY
    n=$(ls "$T/$v".*.txt | wc -l)
    bos=""
    first=$("$WRK" --model "$g" --tokenize < /dev/null 2>"$T/err") || { bad "$v: --tokenize of an empty text: $(cat "$T/err")"; continue; }
    [ -n "$first" ] && bos="$first "
    tok_ok=0; rt_ok=0; i=1
    while IFS= read -r want; do
        c=$(printf '%s/%s.%03d.txt' "$T" "$v" $((i - 1)))
        [ -f "$c" ] || break
        got=$("$WRK" --model "$g" --tokenize < "$c")
        # the suites list ids with a leading space and no BOS
        [ "$got" = "$bos${want# }" ] || [ "$got" = "${bos% }" -a -z "${want# }" ] && tok_ok=$((tok_ok + 1))
        ids=${got#$bos}
        printf '%s' "$ids" | "$WRK" --model "$g" --detokenize > "$T/back"
        if cmp -s "$c" "$T/back" || { printf ' ' | cat - "$c" | cmp -s - "$T/back"; }; then rt_ok=$((rt_ok + 1)); fi
        i=$((i + 1))
    done < "$g.out"
    if [ "$tok_ok" = "$n" ] && [ "$n" -gt 10 ]; then ok "$v: --tokenize matches llama.cpp on all $n cases"
    else bad "$v: --tokenize matches llama.cpp on $tok_ok of $n cases"; fi
    # byte-fallback-free vocabularies cannot round-trip every case (unknown characters): require most
    if [ "$rt_ok" -ge $((n * 3 / 4)) ]; then ok "$v: --detokenize gives the text back on $rt_ok of $n cases"
    else bad "$v: --detokenize gives the text back on only $rt_ok of $n cases"; fi
done

g=$FIX/ggml-vocab-gpt-2.gguf
if echo "1 99999999" | "$WRK" --model "$g" --detokenize > /dev/null 2> "$T/err"; then bad "an id past the vocabulary is refused"
elif [ "$(wc -l < "$T/err")" = 1 ] && grep -q "outside the vocabulary" "$T/err"; then ok "an id past the vocabulary: one clear error line"
else bad "an id past the vocabulary: $(cat "$T/err")"; fi
if echo "12 x" | "$WRK" --model "$g" --detokenize > /dev/null 2> "$T/err"; then bad "non-numeric ids are refused"
elif [ "$(wc -l < "$T/err")" = 1 ] && grep -q "unexpected character" "$T/err"; then ok "non-numeric ids: one clear error line"
else bad "non-numeric ids: $(cat "$T/err")"; fi
if echo hi | "$WRK" --model "$FIX/ggml-vocab-gpt-2.gguf.inp" --tokenize > /dev/null 2> "$T/err"; then bad "a non-GGUF file is refused"
elif [ "$(wc -l < "$T/err")" = 1 ]; then ok "a non-GGUF file: one error line ($(cat "$T/err"))"
else bad "a non-GGUF file: $(cat "$T/err")"; fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
