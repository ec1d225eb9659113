#!/usr/bin/env python3
"""make_logit_fixtures.py: llama.cpp reference logits for strata's tests.

Usage: tests/.venv/bin/python tests/ref/make_logit_fixtures.py [--out DIR] [--cache DIR] [MODEL ...]
  MODEL is one of smollm2, gemma3, smollm2-f32, gemma3-f32, rand-llama, rand-qwen2,
  rand-qwen3, rand-gemma3, rand-llama-linear, rand-qwen2-yarn, rand-qwen3moe,
  rand-qwen3moe-q8_0, rand-qwen3moe-q8_0-f32, rand-gptoss, rand-gptoss-mxfp4,
  rand-gptoss-mxfp4-f32, rand-qwen2moe, rand-qwen35, rand-qwen35moe (default: all). Real models come from the cache
  (tests/ref/fetch_models.sh); rand-* from tests/fixtures/models (tests/ref/make_gguf.py).
  Output: DIR/<model>.<text>.gguf, DIR defaults to tests/fixtures/logits.
  Needs llama-cpp-python in tests/.venv (pip install llama-cpp-python).

The models:
  smollm2, gemma3   llama.cpp on the real quantised files (Q4_1, Q4_K_M). llama.cpp's CPU
                    backend rounds the input of every quantised matmul to 8 bits (q8_1 /
                    q8_0 / q8_K blocks), so these logits are 0.7-2.2 away from an exact
                    float64 forward pass on prose/code (numpy_real.py) and up to 3.5 from
                    strata's engine (tests/test_real.c): a loose sanity reference only.
  smollm2-f32,      llama.cpp on a copy of the same real model with EVERY weight dequantised
  gemma3-f32        to F32 (numpy_real.py's Model + write_f32_copy: gguf.quants.dequantize,
                    metadata copied, general.file_type = 0), written to a temporary
                    directory ($TMPDIR or /tmp; ~0.5 GB for SmolLM2, ~1.1 GB for Gemma 3)
                    and deleted after. llama.cpp then keeps the activations in f32, so these
                    are the tight reference for the real architectures (numpy_real.py
                    --lcpp-f32: 4e-5 from float64 on SmolLM2, 0.01-0.02 on Gemma 3, whose
                    CPU GELU goes through an f16 table). strata.model_file / model_sha256
                    name the ORIGINAL quantised file: strata's engine runs on that file, and
                    dequantising it gives the very weights llama.cpp used here.
  rand-*            random F32 weights (make_gguf.py): the architecture checks;
                    rand-llama-linear and rand-qwen2-yarn check RoPE scaling (linear x4;
                    YaRN x4 from an original context of 256, which long.txt passes);
                    rand-qwen3moe the mixture of experts; rand-qwen35 / rand-qwen35moe the
                    hybrid Gated-DeltaNet models (llama.cpp runs their recurrence over the
                    one-batch prefill in its own form). rand-qwen3moe-q8_0 (its experts
                    Q8_0) is llama.cpp on the quantised file: a loose check, since
                    llama.cpp rounds the experts' inputs to q8_0 and a rounding that
                    changes which experts a token picks moves its logits by whole units.
  rand-qwen3moe-q8_0-f32   llama.cpp on an all-F32 copy of rand-qwen3moe-q8_0.gguf
                    (gguf.quants.dequantize, written here): the tight check of the Q8_0
                    experts, as the <real>-f32 fixtures below.
  rand-gptoss       gpt-oss (sliding/full layers, sinks, biases, YaRN, top-k-then-softmax
                    router, clamped SwiGLU experts), F32 weights. rand-gptoss-mxfp4 (its
                    experts MXFP4) on the quantised file is loose as rand-qwen3moe-q8_0
                    (llama.cpp rounds the experts' inputs to q8_0 blocks);
                    rand-gptoss-mxfp4-f32 (llama.cpp on an all-F32 copy) is the tight one.
  rand-qwen2moe     qwen2moe: its top-2 probabilities as weights (not renormalised) and a
                    shared expert behind a sigmoid gate, F32 weights.

Texts: tests/fixtures/texts/{prose,code,mixed,long}.txt, read as UTF-8 bytes
exactly as stored (trailing newline included). long.txt's tokens are cut to the
first 1024 (enough to pass Gemma 3's 512-token sliding window).

How llama.cpp is run (lcpp.py, the C API of llama-cpp-python):
  CPU only, n_threads = 2, KV cache K and V f32 (GGML_TYPE_F32 = 0), flash
  attention off, n_ctx 2048, n_batch = n_ubatch = 1024: all the text's tokens
  are decoded in ONE llama_decode call, positions 0..n-1, with the logits of
  every position requested. Then greedy: g0 = argmax(row n-1), and for
  i = 1..63 the single token g_{i-1} is decoded at position n+i-1 and
  g_i = argmax of its row (64 tokens; EOS does not stop it).
  Tokenisation: llama_tokenize(text, add_bos = the model's
  tokenizer.ggml.add_bos_token (llama_vocab_get_add_bos), parse_special = false).
  argmax ties go to the lowest token id (np.argmax); top-k is sorted by logit
  descending, ties by lower id.

File layout (GGUF v3 written by gguf.GGUFWriter; a shape written [a][b] is
row-major with b fastest, i.e. GGUF ne = [b, a]):
  metadata:
    general.architecture  string "strata-logits"
    strata.model          string  model key, e.g. "smollm2"
    strata.model_file     string  file name of the model
    strata.model_sha256   string  sha256 of the model file (hex)
    strata.text           string  text file name, e.g. "prose.txt"
    strata.text_sha256    string  sha256 of the text file's bytes (hex)
    strata.add_bos        bool    as used for tokenize
    strata.parse_special  bool    false
    strata.engine         string  "llama-cpp-python X.Y.Z"
    strata.system_info    string  llama_print_system_info()
    strata.kv_type        string  "f32"
    strata.flash_attn     string  "off"
    strata.n_threads      uint32  2
    strata.n_vocab        uint32  vocab size (row length)
    strata.n_tokens       uint32  n
    strata.top_k          uint32  32
    strata.n_greedy       uint32  64
    strata.weights        string  only in the *-f32 fixtures: "all weights dequantised to
                                  F32 (llama.cpp then keeps activations in f32)"
  tensors:
    tokens      int32 [n]           the token ids decoded (BOS included if added)
    argmax      int32 [n]           argmax of each position's logit row
    top_ids     int32 [n][32]       the 32 largest logits' ids, best first
    top_logits  f32   [n][32]       their logits
    lse         f32   [n]           log(sum(exp(row))) of the full row, computed in f64
    full_pos    int32 [k]           positions whose full row is stored (k = 4, or 1
                                    for gemma3's 262144-entry rows: position n-1)
    full_rows   f32   [k][n_vocab]  those rows, bit-exact as llama.cpp returned them
    greedy      int32 [64]          the greedy continuation g0..g63
    greedy_gap  f32   [64]          top-1 minus top-2 logit of the row each g_i was
                                    taken from (small = near tie)
"""
import argparse
import glob
import hashlib
import os
import sys
import tempfile

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import lcpp  # noqa: E402

TOP_K = 32
N_GREEDY = 64
MAX_TOKENS = 1024
N_CTX = 2048
N_THREADS = 2

REAL = {"smollm2": "smollm2-135m-instruct-q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}
# <real>-f32: llama.cpp on an all-F32 dequantised copy of the real model (see the header)
F32 = {"smollm2-f32": "smollm2", "gemma3-f32": "gemma3", "rand-qwen3moe-q8_0-f32": "rand-qwen3moe-q8_0",
       "rand-gptoss-mxfp4-f32": "rand-gptoss-mxfp4"}
F32_WEIGHTS = "all weights dequantised to F32 (llama.cpp then keeps activations in f32)"
RAND = ["rand-llama", "rand-qwen2", "rand-qwen3", "rand-gemma3", "rand-llama-linear", "rand-qwen2-yarn",
        "rand-qwen3moe", "rand-qwen3moe-q8_0", "rand-gptoss", "rand-gptoss-mxfp4", "rand-qwen2moe",
        "rand-qwen35", "rand-qwen35moe"]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_path(key, cache):
    """The model file the fixture names: for <real>-f32 the ORIGINAL quantised file."""
    key = F32.get(key, key)
    if key in REAL:
        p = os.path.join(cache, REAL[key])
        if not os.path.isfile(p):
            raise SystemExit(f"make_logit_fixtures.py: {p} missing; run tests/ref/fetch_models.sh first")
        return p
    p = os.path.join(REPO, "tests", "fixtures", "models", key + ".gguf")
    if not os.path.isfile(p):
        raise SystemExit(f"make_logit_fixtures.py: {p} missing; run tests/ref/make_gguf.py first")
    return p


def top_k(rows, k):
    """rows [n][V] -> (ids [n][k], logits [n][k]), by logit desc then id asc."""
    n = rows.shape[0]
    ids = np.empty((n, k), np.int32)
    vals = np.empty((n, k), np.float32)
    for i in range(n):
        r = rows[i]
        # candidates: everything >= the k-th largest value (covers ties at the cut)
        kth = np.partition(r, -k)[-k]
        cand = np.nonzero(r >= kth)[0]
        order = np.lexsort((cand, -r[cand].astype(np.float64)))[:k]
        ids[i] = cand[order]
        vals[i] = r[cand[order]]
    return ids, vals


def lse(rows):
    """log(sum(exp(row))) of each row, in f64; one row at a time (Gemma 3's [1024][262144]
    rows would otherwise take ~6 GB of f64 temporaries)."""
    out = np.empty(rows.shape[0], np.float32)
    for i in range(rows.shape[0]):
        r = rows[i].astype(np.float64)
        m = r.max()
        out[i] = np.float32(m + np.log(np.exp(r - m).sum()))
    return out


def gap(row):
    s = np.sort(row)
    return np.float32(s[-1] - s[-2])


def run_one(m, text_bytes, max_tokens):
    """Returns (tokens, rows [n][V] f32, greedy ids, greedy gaps)."""
    ids = m.tokenize(text_bytes, m.add_bos, False)[:max_tokens]
    ctx = m.context(N_CTX, type_k=lcpp.F32, type_v=lcpp.F32, flash_attn=lcpp.FA_OFF,
                    n_threads=N_THREADS, n_batch=MAX_TOKENS, n_ubatch=MAX_TOKENS)
    try:
        rows = ctx.decode(ids, 0, True)
        greedy, gaps = [], []
        row = rows[-1]
        for i in range(N_GREEDY):
            g = int(np.argmax(row))
            greedy.append(g)
            gaps.append(gap(row))
            if i + 1 < N_GREEDY:
                row = ctx.decode([g], len(ids) + i, "last")
    finally:
        ctx.close()
    return ids, rows, greedy, gaps


def write_f32_copy(src, dst):
    """dst: src with every weight dequantised to F32 (numpy_real.py's loader and writer; the
    random-weight models, whose MoE experts are 3-D tensors, by gguf.quants.dequantize here)."""
    if os.path.basename(src).startswith("rand-"):
        r = gguf.GGUFReader(src)
        w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
        for k, f in r.fields.items():
            if k.startswith("GGUF.") or k == "general.architecture":
                continue
            vt = f.types[0]
            sub = f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
            w.add_key_value(k, 0 if k == "general.file_type" else f.contents(), vt, sub_type=sub)
        for t in r.tensors:
            vals = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
            shape = tuple(int(x) for x in reversed(t.shape))   # ne reversed: numpy's row-major shape
            w.add_tensor(t.name, np.ascontiguousarray(vals.reshape(shape), dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return
    import numpy_real
    M = numpy_real.Model(src)
    numpy_real.write_f32_copy(src, M, dst)
    del M


def write_fixture(path, key, mpath, msha, tpath, ids, rows, greedy, gaps, add_bos, weights):
    n, V = rows.shape
    full_pos = [n - 1] if V > 100000 else sorted(set([0, n // 3, (2 * n) // 3, n - 1]))
    tids, tvals = top_k(rows, TOP_K)
    w = gguf.GGUFWriter(path, "strata-logits")
    w.add_string("strata.model", key)
    w.add_string("strata.model_file", os.path.basename(mpath))
    w.add_string("strata.model_sha256", msha)
    w.add_string("strata.text", os.path.basename(tpath))
    w.add_string("strata.text_sha256", sha256_file(tpath))
    w.add_bool("strata.add_bos", add_bos)
    w.add_bool("strata.parse_special", False)
    w.add_string("strata.engine", lcpp.engine_version())
    w.add_string("strata.system_info", lcpp.system_info())
    w.add_string("strata.kv_type", "f32")
    w.add_string("strata.flash_attn", "off")
    w.add_uint32("strata.n_threads", N_THREADS)
    w.add_uint32("strata.n_vocab", V)
    w.add_uint32("strata.n_tokens", n)
    w.add_uint32("strata.top_k", TOP_K)
    w.add_uint32("strata.n_greedy", N_GREEDY)
    if weights:
        w.add_string("strata.weights", weights)
    w.add_tensor("tokens", np.array(ids, np.int32))
    w.add_tensor("argmax", rows.argmax(axis=1).astype(np.int32))
    w.add_tensor("top_ids", tids)
    w.add_tensor("top_logits", tvals)
    w.add_tensor("lse", lse(rows))
    w.add_tensor("full_pos", np.array(full_pos, np.int32))
    w.add_tensor("full_rows", np.ascontiguousarray(rows[full_pos]))
    w.add_tensor("greedy", np.array(greedy, np.int32))
    w.add_tensor("greedy_gap", np.array(gaps, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "logits"))
    ap.add_argument("--cache", default=os.environ.get("STRATA_CACHE",
                                                      os.path.expanduser("~/.cache/strata")))
    ap.add_argument("models", nargs="*", default=list(REAL) + list(F32) + RAND)
    a = ap.parse_args()
    lcpp.quiet()
    os.makedirs(a.out, exist_ok=True)
    texts = sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "texts", "*.txt")))
    if not texts:
        raise SystemExit("make_logit_fixtures.py: no tests/fixtures/texts/*.txt")
    for key in a.models:
        if key not in REAL and key not in F32 and key not in RAND:
            raise SystemExit(f"make_logit_fixtures.py: unknown model '{key}'")
        mpath = model_path(key, a.cache)
        msha = sha256_file(mpath)
        tmp, m, run_path, weights = None, None, mpath, None
        try:
            if key in F32:  # llama.cpp runs on the copy; the fixture names the original
                tmp = tempfile.TemporaryDirectory(prefix="strata-f32-")
                run_path = os.path.join(tmp.name, key + ".gguf")
                write_f32_copy(mpath, run_path)
                weights = F32_WEIGHTS
            m = lcpp.Model(run_path)
            for tpath in texts:
                with open(tpath, "rb") as f:
                    text = f.read()
                ids, rows, greedy, gaps = run_one(m, text, MAX_TOKENS)
                tname = os.path.splitext(os.path.basename(tpath))[0]
                out = os.path.join(a.out, f"{key}.{tname}.gguf")
                size = write_fixture(out, key, mpath, msha, tpath, ids, rows, greedy, gaps, m.add_bos,
                                     weights)
                if size > 2 * 1024 * 1024:
                    raise SystemExit(f"make_logit_fixtures.py: {out} is {size} B, over 2 MB")
                print(f"{out}: n={len(ids)} size={size} min_gap={min(gaps):.3g}", flush=True)
        finally:
            if m is not None:
                m.close()
            if tmp is not None:
                tmp.cleanup()


if __name__ == "__main__":
    main()
