#!/usr/bin/env python3
"""llamacpp_bench.py: llama.cpp's speed on SmolLM2, the yardstick for strata-worker.

Usage: tests/.venv/bin/python tests/bench/llamacpp_bench.py [options]
  --model PATH        default $STRATA_CACHE/smollm2-135m-instruct-q4_1.gguf
                      (STRATA_CACHE defaults to ~/.cache/strata; tests/ref/fetch_models.sh)
  --threads N         default 2
  --prefill 512,2048,8192   prefill lengths
  --depths 512,8192   decode depths
  --kv f16,q8_0       KV cache types (K and V the same)
  --fa auto,off       flash attention: auto (llama.cpp's default; on CPU it
                      resolves to on) and off
  --n-gen 32          tokens generated per decode measurement
  --repeat 2          runs per measurement; the best (shortest) is reported

For each length L in prefill + depths, each KV type and flash attention mode, a
fresh llama.cpp context (n_ctx = L + n_gen, n_batch = n_ubatch = 512, CPU only,
the given threads); one untimed warm-up decode first pages the weights in.
  prefill: tokens 0..L-1 decoded in chunks of 512 (only the last position's
           logits requested), wall time of all llama_decode calls; tokens/s = L / t.
  decode:  in the same context, right after that prefill of D = L tokens, n_gen
           tokens generated one at a time (greedy argmax of the last row fed back),
           wall time of those n_gen llama_decode calls; tokens/s = n_gen / t.
The machine must be otherwise idle: with 2 cores, another busy process makes
ggml's spinning thread barriers stall (seen: 0.5 instead of 40 tokens/s), so
each record carries the 1-minute load average and every run's time.
The prompt tokens are tests/fixtures/texts/long.txt tokenised and repeated.
Output: one JSON object per line on stdout, e.g.
  {"engine": "llama.cpp", "version": "llama-cpp-python 0.3.36", "model": "...",
   "phase": "prefill", "tokens": 2048, "depth": 0, "kv": "f16", "flash_attn": "auto",
   "threads": 2, "seconds": 3.2, "tokens_per_s": 640.0, "all_seconds": [3.2, 3.3],
   "loadavg_1m": 0.1}
A combination llama.cpp refuses (q8_0 V cache needs flash attention) prints
{"...", "error": "..."} instead.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "ref"))
import lcpp  # noqa: E402

KV = {"f32": lcpp.F32, "f16": lcpp.F16, "q8_0": lcpp.Q8_0, "q4_0": lcpp.Q4_0}
FA = {"auto": lcpp.FA_AUTO, "off": lcpp.FA_OFF, "on": lcpp.FA_ON}
N_BATCH = 512


def ints(s):
    return [int(x) for x in s.split(",") if x]


def prompt_tokens(m, n):
    with open(os.path.join(REPO, "tests", "fixtures", "texts", "long.txt"), "rb") as f:
        base = m.tokenize(f.read(), False, False)
    ids = [] if not m.add_bos else m.tokenize(b"", True, False)
    while len(ids) < n:
        ids += base
    return ids[:n]


def main():
    ap = argparse.ArgumentParser()
    cache = os.environ.get("STRATA_CACHE", os.path.expanduser("~/.cache/strata"))
    ap.add_argument("--model", default=os.path.join(cache, "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", default="512,2048,8192")
    ap.add_argument("--depths", default="512,8192")
    ap.add_argument("--kv", default="f16,q8_0")
    ap.add_argument("--fa", default="auto,off")
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    if not os.path.isfile(a.model):
        sys.exit(f"llamacpp_bench.py: {a.model} missing; run tests/ref/fetch_models.sh first")
    for kv in a.kv.split(","):
        if kv not in KV:
            sys.exit(f"llamacpp_bench.py: unknown KV type '{kv}' (known: {', '.join(KV)})")
    for fa in a.fa.split(","):
        if fa not in FA:
            sys.exit(f"llamacpp_bench.py: unknown flash attention mode '{fa}' (auto, off, on)")
    lcpp.quiet()
    m = lcpp.Model(a.model)
    prefill, depths = ints(a.prefill), ints(a.depths)
    lengths = sorted(set(prefill) | set(depths))
    ids = prompt_tokens(m, max(lengths + [16]))
    common = dict(engine="llama.cpp", version=lcpp.engine_version(),
                  model=os.path.basename(a.model), threads=a.threads)

    def ctx_for(n_ctx, kv, fa):
        return m.context(n_ctx, type_k=KV[kv], type_v=KV[kv], flash_attn=FA[fa],
                         n_threads=a.threads, n_batch=N_BATCH, n_ubatch=N_BATCH)

    def emit(rec, times, n):
        best = min(times)
        print(json.dumps({**common, **rec, "seconds": round(best, 4),
                          "tokens_per_s": round(n / best, 2),
                          "all_seconds": [round(t, 4) for t in times],
                          "loadavg_1m": round(os.getloadavg()[0], 2)}), flush=True)

    warm = ctx_for(64, "f16", "auto")  # page the weights in
    warm.decode(ids[:16], 0, "last")
    warm.close()

    for kv in a.kv.split(","):
        for fa in a.fa.split(","):
            tag = dict(kv=kv, flash_attn=fa)
            for L in lengths:
                t_pre, t_dec = [], []
                err = None
                for _ in range(a.repeat):
                    try:
                        ctx = ctx_for(L + a.n_gen, kv, fa)
                    except RuntimeError as e:
                        err = str(e)
                        break
                    try:
                        t0 = time.perf_counter()
                        row = ctx.decode(ids[:L], 0, "last")
                        t_pre.append(time.perf_counter() - t0)
                        if L in depths:
                            t = 0.0
                            for i in range(a.n_gen):
                                tok = int(np.argmax(row))
                                t0 = time.perf_counter()
                                row = ctx.decode([tok], L + i, "last")
                                t += time.perf_counter() - t0
                            t_dec.append(t)
                    finally:
                        ctx.close()
                if err is not None:
                    if L in prefill:
                        print(json.dumps({**common, "phase": "prefill", "tokens": L, "depth": 0,
                                          **tag, "error": err}), flush=True)
                    if L in depths:
                        print(json.dumps({**common, "phase": "decode", "tokens": a.n_gen, "depth": L,
                                          **tag, "error": err}), flush=True)
                    continue
                if L in prefill:
                    emit(dict(phase="prefill", tokens=L, depth=0, **tag), t_pre, L)
                if L in depths:
                    emit(dict(phase="decode", tokens=a.n_gen, depth=L, **tag), t_dec, a.n_gen)
    m.close()


if __name__ == "__main__":
    main()
