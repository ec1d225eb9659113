#!/usr/bin/env python3
"""make_pretok_fixtures.py: llama.cpp's tokens for the pre-tokenizers strata has no vocabulary
suite for: "gpt-4o" (o200k: gpt-oss, llama4) and "qwen35" (Qwen3.5).

Neither has a ggml-vocab-*.gguf in llama.cpp's test suites, and the real vocabularies are large, so
the fixture is the GPT-2 byte-level BPE vocabulary already in tests/fixtures/tokenizer with only
its tokenizer.ggml.pre changed: the pre-tokenizer decides where a text is split before the merges,
which is what these cases check. For each pre-tokenizer this script writes that variant to a
temporary file (with the gguf package: every field copied, the one string replaced), tokenizes the
cases with llama.cpp (llama-cpp-python, vocab only, no BOS, special tokens as text) and writes
  tests/fixtures/tokenizer/pre-<name>.inp   the cases, separated as llama.cpp's suites are
  tests/fixtures/tokenizer/pre-<name>.out   llama.cpp's ids, one line per case
tests/test_tok.c builds the same variant with tests/gguf_edit.h and checks strata's ids.

Usage: tests/.venv/bin/python tests/ref/make_pretok_fixtures.py   (from the repository root)
"""
import os
import sys
import tempfile

import gguf
import llama_cpp

HERE = os.path.dirname(os.path.abspath(__file__))
TOKDIR = os.path.join(HERE, "..", "fixtures", "tokenizer")
BASE = os.path.join(TOKDIR, "ggml-vocab-gpt-2.gguf")
SEP = "\n__ggml_vocab_test__\n"

# Cases that exercise what these two pre-tokenizers do differently from GPT-2's: case changes
# inside words (o200k splits "HelloWorld" before "W" and keeps "HTTPServer"'s capitals together),
# contractions after upper- and lower-case words, digit runs (o200k: groups of 3; qwen35: 1),
# combining marks (qwen35 keeps them with the letter), punctuation runs with newlines and '/',
# non-Latin scripts, whitespace runs.
EXTRA = [
    "HelloWorld HTTPServer iPhone eBay McDonald's O'Neil",
    "I'M HERE, you're there; WE'LL see. They'd've gone. DON'T",
    "1 12 123 1234 12345 1234567 3.14159 0x1F2e 2024-11-30",
    "e\u0301te\u0301 cafe\u0301 na\u0308ive \u00e9t\u00e9 Z\u0327e\u0301 a\u030a\u0301",
    "path/to/file.txt\n\n  // comment\n\tx = y /z;\r\n",
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u041c\u0438\u0440 \u03a7\u03b1\u03af\u03c1\u03b5\u03c4\u03b5 \u4f60\u597d\u4e16\u754c \u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4",
    "   leading and trailing   ",
    "emoji \U0001F600\U0001F44D\U0001F3FD and \u2014 dashes \u2026",
    "camelCaseVariableName snake_case_name SCREAMING_CASE kebab-case",
    "ABCdef abcDEF AbCdEf aBcDeF",
    "Numbers: 1000000 and 999,999.99 (approx.) #42 @user",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
]


def cases():
    with open(BASE + ".inp", encoding="utf-8") as f:
        base = f.read().split(SEP)[:-1]   # the text after the last separator is not a case
    return base + EXTRA


def variant(pre, path):
    """Writes the GPT-2 vocabulary with tokenizer.ggml.pre = pre to path."""
    r = gguf.GGUFReader(BASE)
    w = gguf.GGUFWriter(path, arch=None)
    for name, field in r.fields.items():
        if name.startswith("GGUF."):
            continue
        vt = field.types[0]
        sub = field.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, pre if name == "tokenizer.ggml.pre" else field.contents(), vt, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def main():
    texts = cases()
    for pre in ("gpt-4o", "qwen35"):
        with tempfile.TemporaryDirectory() as td:
            path = os.path.join(td, "vocab.gguf")
            variant(pre, path)
            llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
            ids = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts]
            del llm
        with open(os.path.join(TOKDIR, "pre-%s.inp" % pre), "w", encoding="utf-8", newline="") as f:
            f.write(SEP.join(texts) + SEP)
        with open(os.path.join(TOKDIR, "pre-%s.out" % pre), "w", encoding="utf-8", newline="") as f:
            for row in ids:
                f.write("".join(" %d" % i for i in row) + "\n")
        print("pre-%s: %d cases, %d ids" % (pre, len(texts), sum(len(r) for r in ids)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
