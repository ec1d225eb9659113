#!/usr/bin/env python3
"""lcpp_tolerances.py: how far llama.cpp's own logits move between its settings.

Usage: tests/.venv/bin/python tests/ref/lcpp_tolerances.py [--texts prose,long] [MODEL ...]
  MODEL as in make_logit_fixtures.py (default: all six).

The reference is the fixture setting (f32 KV, flash attention off, one batch).
Each variant below is compared with it position by position over the text:
  max|dlogit|, mean and max KL(ref||variant) in nats (full vocabulary, f64),
  and the fraction of positions with the same argmax. Prints one JSON object
  per (model, text, variant) and nothing is written to disk.
Variants: same setting again (must be bit-identical), f16 KV, f32 KV with flash
attention on, f16 KV + flash attention, q8_0 KV + flash attention, f32 KV
prefilled in chunks of 64 (n_ubatch 64) and one token at a time (n_ubatch 1).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import lcpp  # noqa: E402
import make_logit_fixtures as mf  # noqa: E402

VARIANTS = [
    ("repeat",        dict(type_k=lcpp.F32, type_v=lcpp.F32, flash_attn=lcpp.FA_OFF, n_ubatch=1024)),
    ("f16kv",         dict(type_k=lcpp.F16, type_v=lcpp.F16, flash_attn=lcpp.FA_OFF, n_ubatch=1024)),
    ("f32kv_fa",      dict(type_k=lcpp.F32, type_v=lcpp.F32, flash_attn=lcpp.FA_ON, n_ubatch=1024)),
    ("f16kv_fa",      dict(type_k=lcpp.F16, type_v=lcpp.F16, flash_attn=lcpp.FA_ON, n_ubatch=1024)),
    ("q8_0kv_fa",     dict(type_k=lcpp.Q8_0, type_v=lcpp.Q8_0, flash_attn=lcpp.FA_ON, n_ubatch=1024)),
    ("f32kv_ubatch64", dict(type_k=lcpp.F32, type_v=lcpp.F32, flash_attn=lcpp.FA_OFF, n_ubatch=64)),
    ("f32kv_ubatch1", dict(type_k=lcpp.F32, type_v=lcpp.F32, flash_attn=lcpp.FA_OFF, n_ubatch=1)),
]


def log_softmax(rows):
    r = rows.astype(np.float64)
    m = r.max(axis=1, keepdims=True)
    return r - m - np.log(np.exp(r - m).sum(axis=1, keepdims=True))


def run(m, ids, type_k, type_v, flash_attn, n_ubatch):
    ctx = m.context(mf.N_CTX, type_k=type_k, type_v=type_v, flash_attn=flash_attn,
                    n_threads=mf.N_THREADS, n_batch=1024, n_ubatch=n_ubatch)
    try:
        return ctx.decode(ids, 0, True)
    finally:
        ctx.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--texts", default="prose,long")
    ap.add_argument("--cache", default=os.environ.get("STRATA_CACHE",
                                                      os.path.expanduser("~/.cache/strata")))
    ap.add_argument("models", nargs="*", default=list(mf.REAL) + mf.RAND)
    a = ap.parse_args()
    lcpp.quiet()
    for key in a.models:
        m = lcpp.Model(mf.model_path(key, a.cache))
        for tname in a.texts.split(","):
            with open(os.path.join(REPO, "tests", "fixtures", "texts", tname + ".txt"), "rb") as f:
                ids = m.tokenize(f.read(), m.add_bos, False)[:mf.MAX_TOKENS]
            ref = run(m, ids, lcpp.F32, lcpp.F32, lcpp.FA_OFF, 1024)
            lref = log_softmax(ref)
            pref = np.exp(lref)
            for name, kw in VARIANTS:
                try:
                    got = run(m, ids, **kw)
                except RuntimeError as e:
                    print(json.dumps(dict(model=key, text=tname, variant=name, error=str(e))), flush=True)
                    continue
                kl = (pref * (lref - log_softmax(got))).sum(axis=1)
                print(json.dumps(dict(
                    model=key, text=tname, n=len(ids), variant=name,
                    max_abs_dlogit=float(np.abs(got.astype(np.float64) - ref).max()),
                    bit_identical=bool(np.array_equal(got, ref)),
                    kl_mean=float(kl.mean()), kl_max=float(kl.max()),
                    top1_agree=float(np.mean(got.argmax(1) == ref.argmax(1))))), flush=True)
                del got
        m.close()


if __name__ == "__main__":
    main()
