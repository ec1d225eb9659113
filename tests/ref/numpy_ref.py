#!/usr/bin/env python3
"""numpy_ref.py: an independent float64 forward pass of the rand-*.gguf
architectures (llama, qwen2, qwen3, gemma3, gpt-oss, qwen2moe), written from the specification in
make_gguf.py's header, and a check of it against llama.cpp (f32 KV cache, flash attention
off, one batch).

Usage: tests/.venv/bin/python tests/ref/numpy_ref.py [MODEL.gguf ...]
       (default: tests/fixtures/models/rand-{llama,qwen2,qwen3,gemma3,gptoss,qwen2moe}.gguf)

For each model it tokenises tests/fixtures/texts/*.txt with llama.cpp, runs
both, and prints the max |logit difference| and argmax agreement. This is what
the architecture list in make_gguf.py is checked against: if the spec there
were wrong, this would disagree with llama.cpp by O(1), not O(1e-5).
--gelu-f16 emulates llama.cpp's CPU GELU (f16 lookup table) for gemma3, to show
that the remaining gemma3 difference comes from there.
"""
import glob
import math
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)


def load(path):
    r = gguf.GGUFReader(path)
    arch = r.fields["general.architecture"].contents()
    kv = {k: f.contents() for k, f in r.fields.items()
          if not k.startswith("tokenizer.") and not k.startswith("GGUF.")}
    t = {}
    for ten in r.tensors:
        shape = [int(x) for x in ten.shape][::-1]  # numpy order: [ne1][ne0]
        vals = gguf.quants.dequantize(np.asarray(ten.data), ten.tensor_type)  # F32: unchanged
        t[ten.name] = np.array(vals, dtype=np.float64).reshape(shape)
    return arch, kv, t


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, neox, yarn=None):
    """x: [n][heads][hd]; rotate all hd dims. yarn: (factor, n_ctx_orig) for YaRN scaling
    (beta_fast 32, beta_slow 1, ext_factor 1, magnitude 1 + 0.1 ln factor: make_gguf.py's
    header, rand-qwen2-yarn)."""
    hd = x.shape[-1]
    j = np.arange(hd // 2)
    theta = pos[:, None] * base ** (-2.0 * j / hd)  # [n][hd/2]
    mscale = 1.0
    if yarn:
        factor, orig = yarn

        def corr(b):
            return hd * math.log(orig / (2 * math.pi * b)) / (2 * math.log(base))
        low = max(0.0, math.floor(corr(32.0)))
        high = min(hd - 1.0, math.ceil(corr(1.0)))
        mix = 1.0 - np.clip((j - low) / max(0.001, high - low), 0.0, 1.0)
        theta = theta / factor * (1 - mix) + theta * mix
        mscale = 1.0 + 0.1 * math.log(factor)
    c = np.cos(theta)[:, None, :] * mscale
    s = np.sin(theta)[:, None, :] * mscale
    y = x.copy()
    if neox:
        a, b = x[..., :hd // 2], x[..., hd // 2:]
        y[..., :hd // 2] = a * c - b * s
        y[..., hd // 2:] = a * s + b * c
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        y[..., 0::2] = a * c - b * s
        y[..., 1::2] = a * s + b * c
    return y


def gelu_tanh(v):
    return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))


def gelu_f16_table(v):
    """llama.cpp CPU: |v| < 10 -> f16(gelu(f32(f16(v)))) ; v <= -10 -> 0 ; v >= 10 -> v."""
    vh = v.astype(np.float16).astype(np.float32)
    g = (0.5 * vh * (1.0 + np.tanh(np.float32(math.sqrt(2.0 / math.pi)) *
                                     vh * (1.0 + np.float32(0.044715) * vh * vh)))).astype(np.float16)
    out = g.astype(np.float64)
    out = np.where(v <= -10.0, 0.0, out)
    out = np.where(v >= 10.0, v, out)
    return out


def moe_oss(t, p, g, k):
    """gpt-oss's MoE FFN on g [n][dim]: router logits (+ bias), the k largest (ties: lower id),
    softmax over those k; each expert's clamped SwiGLU (alpha 1.702, limit 7) with biases."""
    z = g @ t[p + "ffn_gate_inp.weight"].T + t[p + "ffn_gate_inp.bias"]   # [n][n_expert]
    out = np.zeros_like(g)
    for i in range(g.shape[0]):
        sel = np.lexsort((np.arange(z.shape[1]), -z[i]))[:k]
        w = np.exp(z[i, sel] - z[i, sel].max())
        w /= w.sum()
        for wj, e in zip(w, sel):
            gate = t[p + "ffn_gate_exps.weight"][e] @ g[i] + t[p + "ffn_gate_exps.bias"][e]
            up = t[p + "ffn_up_exps.weight"][e] @ g[i] + t[p + "ffn_up_exps.bias"][e]
            c = np.minimum(gate, 7.0)
            h = c / (1.0 + np.exp(-1.702 * c)) * (np.clip(up, -7.0, 7.0) + 1.0)
            out[i] += wj * (t[p + "ffn_down_exps.weight"][e] @ h + t[p + "ffn_down_exps.bias"][e])
    return out


def moe_qwen2(t, p, g, k):
    """qwen2moe's FFN on g [n][dim]: softmax router, the k most probable experts (ties: lower id)
    weighted by their probabilities as they are (not renormalised), SwiGLU experts; plus the
    shared expert times sigmoid(ffn_gate_inp_shexp . g)."""
    z = g @ t[p + "ffn_gate_inp.weight"].T
    pr = np.exp(z - z.max(axis=1, keepdims=True))
    pr /= pr.sum(axis=1, keepdims=True)
    out = np.zeros_like(g)
    for i in range(g.shape[0]):
        sel = np.lexsort((np.arange(pr.shape[1]), -pr[i]))[:k]
        for e in sel:
            a = t[p + "ffn_gate_exps.weight"][e] @ g[i]
            u = t[p + "ffn_up_exps.weight"][e] @ g[i]
            out[i] += pr[i, e] * (t[p + "ffn_down_exps.weight"][e] @ (a / (1.0 + np.exp(-a)) * u))
    a = g @ t[p + "ffn_gate_shexp.weight"].T
    u = g @ t[p + "ffn_up_shexp.weight"].T
    sh = (a / (1.0 + np.exp(-a)) * u) @ t[p + "ffn_down_shexp.weight"].T
    gate = 1.0 / (1.0 + np.exp(-(g @ t[p + "ffn_gate_inp_shexp.weight"])))
    return out + sh * gate[:, None]


def forward(arch, kv, t, tokens, gelu_f16=False):
    A = arch
    dim = kv[f"{A}.embedding_length"]
    n_layer = kv[f"{A}.block_count"]
    nh = kv[f"{A}.attention.head_count"]
    nkv = kv[f"{A}.attention.head_count_kv"]
    hd = kv.get(f"{A}.attention.key_length", dim // nh)
    eps = kv[f"{A}.attention.layer_norm_rms_epsilon"]
    base = kv.get(f"{A}.rope.freq_base", 10000.0)
    window = kv.get(f"{A}.attention.sliding_window", 0)
    neox = arch != "llama"
    yarn = None
    if kv.get(f"{A}.rope.scaling.type") == "yarn":
        yarn = (kv[f"{A}.rope.scaling.factor"],
                kv.get(f"{A}.rope.scaling.original_context_length", kv[f"{A}.context_length"]))
    oss = arch == "gpt-oss"
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)

    x = t["token_embd.weight"][tokens]  # [n][dim]
    if arch == "gemma3":
        x = x * float(np.float32(math.sqrt(dim)))
    causal = np.tril(np.ones((n, n), bool))
    for il in range(n_layer):
        p = f"blk.{il}."
        local = (arch == "gemma3" and window > 0 and (il % 6) < 5) or (oss and il % 2 == 0)
        lbase = 10000.0 if local and arch == "gemma3" else base
        mask = causal.copy()
        if local:
            qi, ki = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
            mask &= (qi - ki) < window
        h = rmsnorm(x, t[p + "attn_norm.weight"], eps)
        q = h @ t[p + "attn_q.weight"].T
        k = h @ t[p + "attn_k.weight"].T
        v = h @ t[p + "attn_v.weight"].T
        if p + "attn_q.bias" in t:
            q = q + t[p + "attn_q.bias"]
            k = k + t[p + "attn_k.bias"]
            v = v + t[p + "attn_v.bias"]
        q = q.reshape(n, nh, hd)
        k = k.reshape(n, nkv, hd)
        v = v.reshape(n, nkv, hd)
        if p + "attn_q_norm.weight" in t:
            q = rmsnorm(q, t[p + "attn_q_norm.weight"], eps)
            k = rmsnorm(k, t[p + "attn_k_norm.weight"], eps)
        q = rope(q, pos, lbase, neox, yarn)
        k = rope(k, pos, lbase, neox, yarn)
        scale = 1.0 / math.sqrt(hd)
        att = np.empty((n, nh, hd))
        for hh in range(nh):
            kh = hh // (nh // nkv)
            s = (q[:, hh, :] @ k[:, kh, :].T) * scale
            s = np.where(mask, s, -np.inf)
            if oss:  # the sink: one more logit per row, in the softmax, with no value
                s = np.concatenate([s, np.full((n, 1), t[p + "attn_sinks.weight"][hh])], axis=1)
            s = s - s.max(axis=1, keepdims=True)
            e = np.exp(s)
            e /= e.sum(axis=1, keepdims=True)
            att[:, hh, :] = e[:, :n] @ v[:, kh, :]
        o = att.reshape(n, nh * hd) @ t[p + "attn_output.weight"].T
        if oss:
            x = x + o + t[p + "attn_output.bias"]
            x = x + moe_oss(t, p, rmsnorm(x, t[p + "post_attention_norm.weight"], eps),
                            kv[f"{A}.expert_used_count"])
            continue
        if arch == "gemma3":
            x = x + rmsnorm(o, t[p + "post_attention_norm.weight"], eps)
        else:
            x = x + o
        g = rmsnorm(x, t[p + "ffn_norm.weight"], eps)
        if arch == "qwen2moe":
            x = x + moe_qwen2(t, p, g, kv[f"{A}.expert_used_count"])
            continue
        a = g @ t[p + "ffn_gate.weight"].T
        u = g @ t[p + "ffn_up.weight"].T
        if arch == "gemma3":
            act = gelu_f16_table(a) if gelu_f16 else gelu_tanh(a)
            f = (act * u) @ t[p + "ffn_down.weight"].T
            x = x + rmsnorm(f, t[p + "post_ffw_norm.weight"], eps)
        else:
            f = (a / (1.0 + np.exp(-a)) * u) @ t[p + "ffn_down.weight"].T
            x = x + f
    out = t.get("output.weight", t["token_embd.weight"])
    return rmsnorm(x, t["output_norm.weight"], eps) @ out.T


def main():
    import lcpp
    lcpp.quiet()
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gelu_f16 = "--gelu-f16" in sys.argv
    models = args or [os.path.join(REPO, "tests", "fixtures", "models", f"rand-{a}.gguf")
                      for a in ("llama", "qwen2", "qwen3", "gemma3", "gptoss", "qwen2moe")]
    texts = sorted(glob.glob(os.path.join(REPO, "tests", "fixtures", "texts", "*.txt")))
    worst = 0.0
    for path in models:
        arch, kv, t = load(path)
        m = lcpp.Model(path)
        for tp in texts:
            ids = m.tokenize(open(tp, encoding="utf-8").read(), m.add_bos, False)[:256]
            ctx = m.context(512)
            got = ctx.decode(ids, 0, True).astype(np.float64)
            ctx.close()
            ref = forward(arch, kv, t, np.array(ids), gelu_f16=gelu_f16)
            d = np.abs(got - ref).max()
            same = np.mean(got.argmax(1) == ref.argmax(1))
            worst = max(worst, d)
            print(f"{os.path.basename(path)} {os.path.basename(tp)} n={len(ids)} "
                  f"max|llama.cpp - f64| = {d:.3g}  argmax agree {same:.3f}")
        m.close()
    print(f"worst {worst:.3g}")


if __name__ == "__main__":
    main()
