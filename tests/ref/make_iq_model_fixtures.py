#!/usr/bin/env python3
"""make_iq_model_fixtures.py - random-weight llama models in the IQ / MXFP4 / ternary weight types,
quantised by llama.cpp, and llama.cpp's logits on them, for tests/test_quant_iq.c.

Usage: tests/.venv/bin/python tests/ref/make_iq_model_fixtures.py
  Needs gguf, numpy and llama-cpp-python 0.3.36 (tests/ref/README.md). Writes under
  tests/fixtures/quant/:
    models/rand-llama256-iq4xs.gguf   every matrix IQ4_XS (llama.cpp's quantiser, pure = true)
    models/rand-llama256-iqmix.gguf   one matrix or more in each of the twelve types (MIX below)
    logits/<model>.<text>.gguf        llama.cpp on that file
    logits/<model>-f32.<text>.gguf    llama.cpp on an all-F32 copy of it (every weight dequantised
                                      by the gguf package, as make_logit_fixtures.py's *-f32)
  with <text> = prose, code (tests/fixtures/texts).

The F32 source: make_gguf.py's llama (same code, same tokenizer: stories260K's 512-token SPM
vocabulary) with the shape changed so that every matrix row is a whole number of 256-value blocks:
dim 256, 2 layers, 8 heads of 32 / 2 KV heads, n_ff 256, untied output, seed 1101. It is written to
a temporary directory and quantised with llama_model_quantize (2 threads, pure = true, so that
llama.cpp's per-tensor type heuristics stay out of it). The IQ2 / IQ1 / IQ3_XXS quantisers refuse to
run without an importance matrix, so the mixed model is quantised with a uniform one (all ones:
plain least squares), given for every matrix; its per-tensor types are set with tt_overrides.

The logit files have make_logit_fixtures.py's layout and are made by its functions (f32 KV cache,
flash attention off, one batch, 2 threads, 64-token greedy continuation); strata.model is the
model key (e.g. "rand-llama256-iqmix-f32"), strata.model_file the quantised file's name: our
engine always runs on the quantised file. What to expect: on the -f32 fixtures llama.cpp keeps
activations in f32 and only the summation order differs from ours (as rand-llama's 2e-5); on the
quantised files llama.cpp rounds each matmul's input to 8 bits (q8_0 / q8_K blocks), which moves
its logits from ours by far more (tests/test_quant_iq.c states the bounds and what was observed).

Rerunning with the same package versions gives byte-identical files.
"""
import ctypes
import os
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import lcpp  # noqa: E402
import make_gguf  # noqa: E402
import make_logit_fixtures as mlf  # noqa: E402
import llama_cpp as L  # noqa: E402

OUT = os.path.join(REPO, "tests", "fixtures", "quant")
TEXTS = ["prose", "code"]
SOURCE = ("llama", dict(dim=256, n_layer=2, n_head=8, n_head_kv=2, head_dim=32, n_ff=256, seed=1101))

# rand-llama256-iqmix: the type of every matrix (the rest of the model, the norms, stays F32)
MIX = {
    "token_embd.weight": T.IQ4_NL, "output.weight": T.MXFP4,
    "blk.0.attn_q.weight": T.IQ2_XXS, "blk.0.attn_k.weight": T.IQ2_XS, "blk.0.attn_v.weight": T.IQ3_XXS,
    "blk.0.attn_output.weight": T.IQ1_S, "blk.0.ffn_gate.weight": T.IQ3_S, "blk.0.ffn_up.weight": T.IQ2_S,
    "blk.0.ffn_down.weight": T.IQ4_XS,
    "blk.1.attn_q.weight": T.IQ1_M, "blk.1.attn_k.weight": T.TQ1_0, "blk.1.attn_v.weight": T.TQ2_0,
    "blk.1.attn_output.weight": T.IQ4_XS, "blk.1.ffn_gate.weight": T.IQ4_NL, "blk.1.ffn_up.weight": T.MXFP4,
    "blk.1.ffn_down.weight": T.IQ3_S,
}
MODELS = {
    "rand-llama256-iq4xs": None,      # pure IQ4_XS
    "rand-llama256-iqmix": MIX,
}


def quantise(src, dst, overrides):
    """llama_model_quantize src -> dst: ftype IQ4_XS, pure; overrides: {tensor name: type} (then
    with a uniform importance matrix for every matrix)."""
    p = L.llama_model_quantize_default_params()
    p.ftype = L.LLAMA_FTYPE_MOSTLY_IQ4_XS
    p.pure = True
    p.nthread = 2
    keep = []   # keep the ctypes buffers alive until the call returns
    if overrides:
        tt = (L.llama_model_tensor_override * (len(overrides) + 1))()
        for i, (name, qt) in enumerate(overrides.items()):
            pat = ("^" + name.replace(".", r"\.") + "$").encode()
            keep.append(pat)
            tt[i].pattern = pat
            tt[i].type = int(qt)
        tt[len(overrides)].pattern = None
        p.tt_overrides = tt
        mats = [t for t in gguf.GGUFReader(src).tensors if len(t.shape) == 2]
        im = (L.llama_model_imatrix_data * (len(mats) + 1))()
        for i, t in enumerate(mats):
            ones = np.ones(int(t.shape[0]), np.float32)
            name = t.name.encode()
            keep += [ones, name]
            im[i].name = name
            im[i].data = ones.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
            im[i].size = ones.size
        im[len(mats)].name = None
        p.imatrix = im
    if L.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p)) != 0:
        raise SystemExit(f"make_iq_model_fixtures.py: llama_model_quantize failed for {dst}")
    got = {t.name: t.tensor_type for t in gguf.GGUFReader(dst).tensors if len(t.shape) == 2}
    for name, qt in got.items():
        want = overrides.get(name, T.IQ4_XS) if overrides else T.IQ4_XS
        assert qt == want, (dst, name, qt, want)


def main():
    lcpp.quiet()
    os.makedirs(os.path.join(OUT, "models"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "logits"), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="strata-iq-") as tmp:
        make_gguf.MODELS["rand-llama256"] = SOURCE
        src = os.path.join(tmp, "rand-llama256.gguf")
        make_gguf.build("rand-llama256", src)
        for key, overrides in MODELS.items():
            mpath = os.path.join(OUT, "models", key + ".gguf")
            quantise(src, mpath, overrides)
            print(f"{os.path.relpath(mpath, REPO)}: {os.path.getsize(mpath)} B", flush=True)
            msha = mlf.sha256_file(mpath)
            f32 = os.path.join(tmp, key + "-f32.gguf")
            mlf.write_f32_copy(mpath, f32)
            for run_key, run_path, weights in ((key, mpath, None), (key + "-f32", f32, mlf.F32_WEIGHTS)):
                m = lcpp.Model(run_path)
                try:
                    for tname in TEXTS:
                        tpath = os.path.join(REPO, "tests", "fixtures", "texts", tname + ".txt")
                        with open(tpath, "rb") as f:
                            text = f.read()
                        ids, rows, greedy, gaps = mlf.run_one(m, text, mlf.MAX_TOKENS)
                        out = os.path.join(OUT, "logits", f"{run_key}.{tname}.gguf")
                        size = mlf.write_fixture(out, run_key, mpath, msha, tpath, ids, rows, greedy, gaps,
                                                 m.add_bos, weights)
                        print(f"{os.path.relpath(out, REPO)}: n={len(ids)} size={size} min_gap={min(gaps):.3g}",
                              flush=True)
                finally:
                    m.close()


if __name__ == "__main__":
    main()
