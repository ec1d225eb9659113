#!/usr/bin/env python3
"""numpy_qwen35.py: an independent float64 forward pass of rand-qwen35 (make_gguf.py), to tell
apart a difference in what is computed from rounding when strata and llama.cpp disagree.

Usage: tests/.venv/bin/python tests/ref/numpy_qwen35.py [FIXTURE [N [DUMP]]]
  FIXTURE  a logit fixture of rand-qwen35 (default tests/fixtures/logits/rand-qwen35.long.gguf):
           its tokens are run and its top-32 logits (llama.cpp's) compared with float64
  N        the first N tokens only (default all)
  DUMP     strata's rows for the same tokens (strata-worker --kv f32 --tokens-file T
           --dump-logits DUMP: two int32 then [n][n_vocab] f32), compared the same way
Prints the largest |float64 - llama.cpp| and |float64 - strata| over the stored top-32 logits.

The forward pass is docs/DESIGN.md §3.1.3 written with numpy in float64 (RoPE angles exact):
attention layers with per-head queries then gates in attn_q, QK-norm, neox RoPE on the first
rope.dimension_count dims, sigmoid-gated output; linear layers with the causal conv over the
conv kernel (zeros before position 0), SiLU, q/k L2-normed (x / sqrt(sum x^2 + eps)), value
head h reading key head h mod n_k, the gated delta rule with state S_h[value dim][key dim],
the gated RMSNorm and ssm_out; post_attention_norm as the FFN's input norm; tied output.
"""
import os
import sys

import gguf
import numpy as np

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def main():
    fix = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "tests/fixtures/logits/rand-qwen35.long.gguf")
    r = gguf.GGUFReader(os.path.join(REPO, "tests/fixtures/models/rand-qwen35.gguf"))
    W = {t.name: np.array(t.data, dtype=np.float64) for t in r.tensors}
    meta = {k: f.contents() for k, f in r.fields.items() if k.startswith("qwen35.")}
    nl, nh, nkv = meta["qwen35.block_count"], meta["qwen35.attention.head_count"], meta["qwen35.attention.head_count_kv"]
    hd, nrot, eps = meta["qwen35.attention.key_length"], meta["qwen35.rope.dimension_count"], \
        meta["qwen35.attention.layer_norm_rms_epsilon"]
    base, interval = meta["qwen35.rope.freq_base"], meta["qwen35.full_attention_interval"]
    K, d, nk, nv = meta["qwen35.ssm.conv_kernel"], meta["qwen35.ssm.state_size"], meta["qwen35.ssm.group_count"], \
        meta["qwen35.ssm.time_step_rank"]
    F = {t.name: np.array(t.data) for t in gguf.GGUFReader(fix).tensors}
    toks = F["tokens"].astype(int)
    n = min(int(sys.argv[2]), len(toks)) if len(sys.argv) > 2 else len(toks)
    toks = toks[:n]

    def rms(x, w):
        return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * w

    def silu(x):
        return x / (1 + np.exp(-x))

    def sig(x):
        return 1 / (1 + np.exp(-x))

    def rope(x, pos):   # x [heads][hd]: neox pairs (i, i + nrot/2) over the first nrot dims
        half = nrot // 2
        th = pos * base ** (-2 * np.arange(half) / nrot)
        y = x.copy()
        a, b = x[:, :half], x[:, half:nrot]
        y[:, :half], y[:, half:nrot] = a * np.cos(th) - b * np.sin(th), a * np.sin(th) + b * np.cos(th)
        return y

    emb = W["token_embd.weight"]
    x = emb[toks].copy()
    for l in range(nl):
        p = f"blk.{l}."
        xb = rms(x, W[p + "attn_norm.weight"])
        if (l + 1) % interval == 0:   # gated full attention
            qg = (xb @ W[p + "attn_q.weight"].T).reshape(n, nh, 2 * hd)
            q, g = qg[:, :, :hd], qg[:, :, hd:]
            k = (xb @ W[p + "attn_k.weight"].T).reshape(n, nkv, hd)
            v = (xb @ W[p + "attn_v.weight"].T).reshape(n, nkv, hd)
            q, k = rms(q, W[p + "attn_q_norm.weight"]), rms(k, W[p + "attn_k_norm.weight"])
            q = np.stack([rope(q[t], t) for t in range(n)])
            k = np.stack([rope(k[t], t) for t in range(n)])
            out = np.zeros((n, nh, hd))
            for h in range(nh):
                g_ = h // (nh // nkv)
                s = (q[:, h] @ k[:, g_].T) / np.sqrt(hd) + np.triu(np.full((n, n), -np.inf), 1)
                w = np.exp(s - s.max(-1, keepdims=True))
                out[:, h] = (w / w.sum(-1, keepdims=True)) @ v[:, g_]
            o = (out * sig(g)).reshape(n, nh * hd) @ W[p + "attn_output.weight"].T
        else:                          # Gated DeltaNet
            cd = 2 * nk * d + nv * d
            mix = xb @ W[p + "attn_qkv.weight"].T
            z = (xb @ W[p + "attn_gate.weight"].T).reshape(n, nv, d)
            beta = sig(xb @ W[p + "ssm_beta.weight"].T)
            a = xb @ W[p + "ssm_alpha.weight"].T + W[p + "ssm_dt.bias"]
            decay = np.exp(np.where(a > 20, a, np.log1p(np.exp(a))) * W[p + "ssm_a"])
            cw = W[p + "ssm_conv1d.weight"].reshape(cd, K)
            pad = np.vstack([np.zeros((K - 1, cd)), mix])
            c = silu(np.stack([(pad[t:t + K] * cw.T).sum(0) for t in range(n)]))
            q = c[:, :nk * d].reshape(n, nk, d)
            k = c[:, nk * d:2 * nk * d].reshape(n, nk, d)
            v = c[:, 2 * nk * d:].reshape(n, nv, d)
            q = q / np.sqrt((q * q).sum(-1, keepdims=True) + eps)
            k = k / np.sqrt((k * k).sum(-1, keepdims=True) + eps)
            S = np.zeros((nv, d, d))
            o = np.zeros((n, nv, d))
            for t in range(n):
                for h in range(nv):
                    kh = h % nk
                    S[h] *= decay[t, h]
                    e = (v[t, h] - S[h] @ k[t, kh]) * beta[t, h]
                    S[h] += np.outer(e, k[t, kh])
                    o[t, h] = S[h] @ q[t, kh] / np.sqrt(d)
            o = (rms(o, W[p + "ssm_norm.weight"]) * silu(z)).reshape(n, nv * d) @ W[p + "ssm_out.weight"].T
        x = x + o
        xb = rms(x, W[p + "post_attention_norm.weight"])
        x = x + (silu(xb @ W[p + "ffn_gate.weight"].T) * (xb @ W[p + "ffn_up.weight"].T)) @ W[p + "ffn_down.weight"].T
    logits = rms(x, W["output_norm.weight"]) @ emb.T
    ids = F["top_ids"].reshape(-1, 32)[:n].astype(int)
    ref = F["top_logits"].reshape(-1, 32)[:n]
    mine = np.take_along_axis(logits, ids, 1)
    print(f"{n} positions: max |float64 - llama.cpp| = {np.abs(mine - ref).max():.3g} over the top 32")
    if len(sys.argv) > 3:
        ours = np.fromfile(sys.argv[3], dtype=np.float32)[2:].reshape(-1, logits.shape[1])[:n]
        print(f"{n} positions: max |float64 - strata| = {np.abs(mine - np.take_along_axis(ours, ids, 1)).max():.3g} over the same")


if __name__ == "__main__":
    main()
