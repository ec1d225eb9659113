#!/usr/bin/env bash
# make_tok_seeds.sh — the tokenizer fuzzer's seed corpus (tests/fuzz/corpus/tok/): the first byte
# picks the vocabulary (0 stories260K, 1 llama-spm, 2 gpt-2, 3 deepseek-llm; +4 parses specials),
# the rest is text: pieces of the fixture texts, specials, whitespace runs, invalid UTF-8.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=tests/fuzz/corpus/tok
mkdir -p "$out"
t=tests/fixtures/texts
for v in 0 1 2 3; do
    { printf "\\x0$v"; head -c 600 $t/prose.txt; } > "$out/prose-$v.txt"
    { printf "\\x0$v"; head -c 600 $t/code.txt; } > "$out/code-$v.txt"
    { printf "\\x0$v"; head -c 600 $t/mixed.txt; } > "$out/mixed-$v.txt"
    { printf "\\x0$((v + 4))"; printf '<s>Hello</s> <|endoftext|><|im_start|>user\n  tabs\t\tand  spaces  \r\n'; } > "$out/special-$v.txt"
    { printf "\\x0$v"; printf 'ok \xff\xfe bad \xc3\x28 \xe2\x82 end'; } > "$out/badutf8-$v.txt"
    { printf "\\x0$v"; printf '     \n\n\n\t 1234567890 3.14159 ... !!! ??? \xf0\x9f\x98\x80\xe4\xbd\xa0\xe5\xa5\xbd'; } > "$out/misc-$v.txt"
done
ls "$out" | wc -l
