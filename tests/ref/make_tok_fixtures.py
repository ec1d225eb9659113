#!/usr/bin/env python3
"""make_tok_fixtures.py: llama.cpp tokenizer fixtures for SmolLM2 and Gemma 3.

Usage: tests/.venv/bin/python tests/ref/make_tok_fixtures.py [--out DIR] [--cache DIR]
  Output (DIR defaults to tests/fixtures/tok):
    smollm2.txt, gemma3.txt   the test cases (the same in both: one copy per
                              model, so that each .txt/.ids pair stands alone)
    smollm2.ids, gemma3.ids   llama.cpp's token ids for each case
    smollm2.special.txt/.ids, gemma3.special.txt/.ids   chat-template-like cases
                              tokenised with special tokens parsed and BOS as the
                              model says
  The real models come from the cache (tests/ref/fetch_models.sh).

Format: the same as llama.cpp's tokenizer suites in tests/fixtures/tokenizer
(*.inp / *.out): in the .txt every case is followed by the line
"__ggml_vocab_test__" (i.e. the file is the concatenation of
case + "\\n__ggml_vocab_test__\\n"); the .ids has one line per case, each id
written as " " + decimal id (so a line starts with a space; an empty case gives
an empty line).

Flags (llama_tokenize):
  {model}.ids          add_bos = false, parse_special = false (as llama.cpp's own
                       tokenizer tests): special-token text such as "<|im_start|>"
                       or "<start_of_turn>" is tokenised as plain text.
  {model}.special.ids  add_bos = the model's tokenizer.ggml.add_bos_token
                       (SmolLM2: false, Gemma 3: true), parse_special = true.

The cases (>= 50 KB, deterministic: a fixed seed and fixed inputs) are built from
  - the texts in tests/fixtures/texts/ (design-note.md among them), split into
    paragraphs and lines (prose, markdown, tables, code spans);
  - generated C-like and Python-like code (identifiers, numbers, operators,
    tabs and space indentation, comments, string escapes);
  - generated Unicode: Latin accents, Greek, Cyrillic, Armenian, Hebrew,
    Arabic, Devanagari, Bengali, Thai, Georgian, Hangul, kana, CJK, emoji with
    skin tones / ZWJ / variation selectors, combining marks, fullwidth forms,
    math and box drawing, NBSP, zero-width and bidi marks;
  - digit runs of every length 1..20, decimals, exponents, thousands separators,
    dates, hex;
  - whitespace runs: spaces, tabs, newlines, CRLF, mixed, leading and trailing;
  - contractions ('s 't 're 've 'm 'll 'd in all cases), URLs, paths, e-mail
    addresses, JSON, and tiny cases ("", " ", "\\n", ...).
"""
import argparse
import os
import random
import re
import sys
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import lcpp  # noqa: E402
import make_logit_fixtures as mf  # noqa: E402

SEP = "\n__ggml_vocab_test__\n"
SEED = 20240611

WORDS = ("the of and to in is was for on that with as by at from it be this are an or "
         "cache token model layer head value key query batch prefix depth arm driver worker "
         "quantise round scale block group vector matrix kernel thread socket message reply "
         "lighthouse keeper harbour weather north evening lamp boat sail pier window river "
         "quickly slowly never always perhaps exactly nearly almost").split()
IDENTS = ("x y i j n k v q dim n_tok n_head head_dim kv_cache logits buf out row col seq pos "
          "len size count scale max_abs group_size q8 fp16 bf16 tmp err rc ctx model cfg").split()

UNICODE_RANGES = [
    (0x00C0, 0x017F), (0x0391, 0x03C9), (0x0400, 0x045F), (0x0531, 0x0587),
    (0x05D0, 0x05EA), (0x0621, 0x064A), (0x0905, 0x0939), (0x0985, 0x09B9),
    (0x0E01, 0x0E3A), (0x10D0, 0x10FA), (0xAC00, 0xD7A3), (0x3041, 0x3096),
    (0x30A1, 0x30FA), (0x4E00, 0x9FFF), (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF),
    (0xFF01, 0xFF5E), (0x2200, 0x22FF), (0x2500, 0x257F), (0x2190, 0x21FF),
]
ODD_CHARS = ["\u00a0", "\u200b", "\u200d", "\u200e", "\u200f", "\ufe0f", "\u2028",
             "\u3000", "\u00ad", "\u2060", "\ufeff"]
COMBINING = [chr(c) for c in range(0x0300, 0x036F)]


def ok_char(c):
    cat = unicodedata.category(c)
    return cat not in ("Cn", "Co", "Cs", "Cc")


def rand_unicode(rng, n):
    out = []
    while len(out) < n:
        lo, hi = rng.choice(UNICODE_RANGES)
        c = chr(rng.randint(lo, hi))
        if not ok_char(c):
            continue
        out.append(c)
        r = rng.random()
        if r < 0.05:
            out.append(rng.choice(COMBINING))
        elif r < 0.08:
            out.append(rng.choice(ODD_CHARS))
        elif r < 0.25:
            out.append(" ")
    return "".join(out)


def rand_words(rng, n):
    ws = []
    for i in range(n):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.capitalize()
        elif r < 0.13:
            w = w.upper()
        ws.append(w)
        if rng.random() < 0.08:
            ws[-1] += rng.choice([",", ".", ";", ":", "!", "?", "...", " -", "'s", "n't"])
    return " ".join(ws)


def rand_expr(rng, depth=0):
    if depth > 2 or rng.random() < 0.4:
        r = rng.random()
        if r < 0.5:
            return rng.choice(IDENTS)
        if r < 0.75:
            return str(rng.randint(0, 10 ** rng.randint(1, 6)))
        return f"{rng.uniform(-100, 100):.{rng.randint(1, 6)}f}" + rng.choice(["", "f", "e-3"])
    op = rng.choice(["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<=", ">=", "&&", "||"])
    e = f"{rand_expr(rng, depth + 1)} {op} {rand_expr(rng, depth + 1)}"
    return f"({e})" if rng.random() < 0.4 else e


def rand_c(rng, n_lines):
    lines = [f"/* {rand_words(rng, rng.randint(3, 10))} */",
             f"static int {rng.choice(IDENTS)}_{rng.choice(IDENTS)}(const float *{rng.choice(IDENTS)}, int n)",
             "{"]
    indent = 1
    for _ in range(n_lines):
        tab = "\t" * indent if rng.random() < 0.3 else "    " * indent
        r = rng.random()
        if r < 0.2 and indent < 4:
            lines.append(f"{tab}for (int i = 0; i < {rand_expr(rng)}; i++) {{")
            indent += 1
        elif r < 0.3 and indent > 1:
            indent -= 1
            lines.append(("    " * indent) + "}")
        elif r < 0.4:
            lines.append(f'{tab}fprintf(stderr, "{rand_words(rng, 3)}: %d (%s)\\n", {rng.choice(IDENTS)}, "x\\ty");')
        elif r < 0.5:
            lines.append(f"{tab}// {rand_words(rng, rng.randint(2, 8))}")
        else:
            lines.append(f"{tab}{rng.choice(IDENTS)}[{rand_expr(rng)}] {rng.choice(['=', '+=', '-=', '*=', '|='])} {rand_expr(rng)};")
    while indent > 0:
        indent -= 1
        lines.append(("    " * indent) + "}")
    return "\n".join(lines)


def rand_py(rng, n_lines):
    lines = [f"def {rng.choice(IDENTS)}_{rng.choice(IDENTS)}({rng.choice(IDENTS)}, *args, **kw):",
             f'    """{rand_words(rng, rng.randint(4, 12)).capitalize()}."""']
    indent = 1
    for _ in range(n_lines):
        sp = "    " * indent
        r = rng.random()
        if r < 0.15 and indent < 4:
            lines.append(f"{sp}if {rand_expr(rng)}:")
            indent += 1
        elif r < 0.25 and indent > 1:
            indent -= 1
            lines.append(f"{'    ' * indent}else:")
            indent += 1
        elif r < 0.35:
            lines.append(f"{sp}{rng.choice(IDENTS)} = [{', '.join(str(rng.randint(-999, 999)) for _ in range(rng.randint(1, 6)))}]")
        elif r < 0.45:
            lines.append(f'{sp}print(f"{{{rng.choice(IDENTS)}!r:>{rng.randint(2, 12)}}} {rand_words(rng, 2)}")')
        elif r < 0.5:
            lines.append(f"{sp}# {rand_words(rng, rng.randint(2, 9))}")
        else:
            lines.append(f"{sp}{rng.choice(IDENTS)} = {rand_expr(rng)}")
        if rng.random() < 0.05:
            lines.append("")
    return "\n".join(lines)


def digit_cases(rng):
    cases = []
    for n in range(1, 21):
        cases.append("".join(str(rng.randint(0, 9)) for _ in range(n)))
    cases.append(" ".join(str(10 ** k) for k in range(0, 19)))
    cases.append(" ".join(f"{rng.randint(0, 10**9):,}" for _ in range(12)))
    cases.append(" ".join(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}" for _ in range(12)))
    cases.append(" ".join(f"{rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30):.6e}" for _ in range(10)))
    cases.append(" ".join(f"0x{rng.getrandbits(32):08X} 0b{rng.getrandbits(8):08b} 0o{rng.getrandbits(9):o}" for _ in range(6)))
    cases.append(" ".join(f"{rng.randint(1900, 2099)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                          f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z" for _ in range(6)))
    cases.append("v1.2.3 3.14159 2.71828 1e10 1E-10 .5 5. -0 +7 ½ ⅓ ² ³ ١٢٣ ४५६ 一二三 ①②③ Ⅻ")
    cases.append("\n".join(f"| {i} | {rng.randint(0, 99999)} | {rng.random():.4f} |" for i in range(12)))
    return cases


def whitespace_cases(rng):
    cases = ["", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t\n  \n",
             "a  b   c    d     e", "x\ty\t\tz\t\t\tw", "line\r\nline\r\nline\r\n",
             "  leading spaces", "trailing spaces   ", "\n\nleading newlines",
             "trailing newlines\n\n\n", "    indented\n        more\n\tTab\n \t mixed"]
    for _ in range(8):
        parts = []
        for _ in range(rng.randint(4, 20)):
            parts.append(rng.choice(WORDS))
            parts.append(rng.choice([" " * rng.randint(1, 17), "\t" * rng.randint(1, 4), "\n" * rng.randint(1, 5),
                                     " \n", "\n ", "\r\n", " \t ", "\u00a0", "\u3000"]))
        cases.append("".join(parts))
    return cases


def misc_cases():
    return [
        "I'm sure you've seen it; they'll say it's what we'd done. YOU'RE RIGHT, I'D SAY, WE'VE BEEN TOLD HE'S THERE.",
        "don't won't can't shouldn't ain't y'all o'clock rock'n'roll 'quoted' \"double\" `back`",
        "https://example.org/path/to/file.gguf?version=3&x=%20y#frag mailto:someone@example.com ftp://host:21/",
        "/usr/local/lib/x86_64-linux-gnu/libnng.so.1.5.2 C:\\Users\\strata\\models\\gemma-3-270m.gguf ~/.cache/strata",
        '{"model": "smollm2", "kv": ["f16", "int8"], "depths": [512, 1024, 2048], "ok": true, "x": null}',
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n <start_of_turn>model <end_of_turn> <bos> <eos> </s> <s> <unk> <pad>",
        "#include <stdio.h>\nint main(void) { printf(\"%s\\n\", \"hi\"); return 0; }",
        "a.b.c a..b a...b ?!?! -- --- ---- ==== ____ **** #### //// \\\\\\\\ ~~~~ ++++ ::::",
        "CamelCaseWord snake_case_word kebab-case-word SCREAMING_CASE mixedCASEWord HTTPServer2Go",
        "Ünïcödé façade naïve coöperate résumé Ångström Øresund Straße İstanbul ǅemal",
        "🙂👍🏽👩‍👩‍👧‍👦🏳️‍🌈 1️⃣ ❤️ ☕ 🇩🇪🇯🇵 ✈︎ ✈️",
        "e\u0301 e\u0300\u0323 n\u0303 A\u030a ﬁ ﬂ Ⅳ ㎏ ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３",
    ]


def text_cases(rng):
    cases = []
    tdir = os.path.join(REPO, "tests", "fixtures", "texts")
    for name in sorted(os.listdir(tdir)):
        if name.endswith(".txt"):
            cases.append(open(os.path.join(tdir, name), encoding="utf-8").read())
    design = os.path.join(REPO, "tests", "fixtures", "texts", "design-note.md")
    paras = re.split(r"\n\s*\n", open(design, encoding="utf-8").read())
    # (a paragraph naming the separator itself cannot be a case)
    cases.extend(p for p in paras if p.strip() and "__ggml_vocab_test__" not in p)
    return cases


def build_cases():
    rng = random.Random(SEED)
    cases = []
    cases += misc_cases()
    cases += whitespace_cases(rng)
    cases += digit_cases(rng)
    cases += text_cases(rng)
    for _ in range(20):
        cases.append(rand_c(rng, rng.randint(8, 40)))
        cases.append(rand_py(rng, rng.randint(8, 40)))
    for _ in range(30):
        cases.append(rand_unicode(rng, rng.randint(20, 200)))
    for _ in range(20):
        s = rand_words(rng, rng.randint(20, 80))
        s += " " + rand_unicode(rng, rng.randint(5, 30)) + " " + str(rng.randint(0, 10 ** 12))
        cases.append(s)
    for c in cases:
        assert SEP not in c and "__ggml_vocab_test__" not in c
    return cases


SPECIAL_CASES = {
    "smollm2": [
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|>Hello<|endoftext|>",
        "plain text with no special tokens",
        "<|im_start|><|im_end|><|im_start|>",
        "<|im_start |> not special <|im_end",
    ],
    "gemma3": [
        "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
        "<bos>text<eos>",
        "plain text with no special tokens",
        "<start_of_turn><end_of_turn><start_of_turn>",
        "<start_of_turn > not special <end_of_turn",
    ],
}


def write_pair(out_dir, stem, cases, ids):
    with open(os.path.join(out_dir, stem + ".txt"), "w", encoding="utf-8", newline="") as f:
        for c in cases:
            f.write(c + SEP)
    with open(os.path.join(out_dir, stem + ".ids"), "w", encoding="utf-8", newline="\n") as f:
        for row in ids:
            f.write("".join(f" {t}" for t in row) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "tok"))
    ap.add_argument("--cache", default=os.environ.get("STRATA_CACHE",
                                                      os.path.expanduser("~/.cache/strata")))
    a = ap.parse_args()
    lcpp.quiet()
    os.makedirs(a.out, exist_ok=True)
    cases = build_cases()
    size = sum(len(c.encode("utf-8")) for c in cases)
    if size < 50 * 1024:
        raise SystemExit(f"make_tok_fixtures.py: only {size} B of cases, want >= 50 KB")
    for key in ("smollm2", "gemma3"):
        m = lcpp.Model(mf.model_path(key, a.cache))
        try:
            ids = [m.tokenize(c, False, False) for c in cases]
            write_pair(a.out, key, cases, ids)
            sc = SPECIAL_CASES[key]
            write_pair(a.out, key + ".special", sc, [m.tokenize(c, m.add_bos, True) for c in sc])
            print(f"{key}: {len(cases)} cases, {size} B, {sum(len(r) for r in ids)} tokens; "
                  f"special: add_bos={m.add_bos}", flush=True)
        finally:
            m.close()


if __name__ == "__main__":
    main()
