#!/usr/bin/env python3
"""numpy_real.py: an independent float64 forward pass of the two REAL models
(SmolLM2-135M-Instruct Q4_1, llama arch; Gemma 3 270M Q4_K_M, gemma3 arch),
compared with llama.cpp's stored logits and with strata's engine.

Usage:
  make build/strata-worker
  tests/.venv/bin/python tests/ref/numpy_real.py [options]
    --models smollm2,gemma3  --texts prose,code   (defaults; texts: prose code mixed long)
    --cache DIR      where the models are (default $STRATA_CACHE or ~/.cache/strata;
                     tests/ref/fetch_models.sh puts them there)
    --no-engine      do not run ./build/strata-worker
    --max-tokens N   only the first N tokens of each text
    --stride S       compare the rows of every S-th position (+ the last and the fixture's
                     full rows) instead of all: for the 1024-token long.txt, which is the
                     one that goes past Gemma 3's 512-token sliding window
    --emulate-lcpp   a second f64 pass that does what llama.cpp's CPU backend does to the
                     activations: the input of every quantised-weight matmul rounded to 8
                     bits as ggml's x86 code does (q8_1 blocks of 32 with fp16 block sums for
                     Q4_1 / Q5_1 weights, q8_0 for Q4_0 / Q5_0 / Q8_0, q8_K blocks of 256 for
                     the k-quants) and GELU through ggml's f16 table
    --lcpp-f32       write a copy of the model with every weight dequantised to f32 (the
                     values the f64 pass uses) and run llama.cpp on it (llama-cpp-python via
                     lcpp.py: CPU, f32 KV cache, flash attention off). llama.cpp then has no
                     8-bit activations, so this checks the ARCHITECTURE (RoPE, norms, window,
                     scales, ...) of the f64 pass against llama.cpp's own graph
    --keep-quant A,B with --lcpp-f32: tensors whose name contains A or B stay quantised in
                     the copy, and the f64 pass compared with it rounds the inputs of exactly
                     those matmuls (e.g. token_embd, blk.5.ffn_up): measures what the 8-bit
                     rounding of one matmul does inside llama.cpp, and checks the emulation
    --mutations      run the f64 pass again with one deliberate architecture error each
                     (RoPE pairing, no sliding window, ...) and print how far that moves the
                     logits: shows that agreement at 1e-4 can tell such errors apart
  Cost: one BLAS thread (set here), ~1 min for the default run with --emulate-lcpp and
  --lcpp-f32, ~1.5 min for --texts long --stride 16; peak memory ~4 GB (Gemma's 262144 x 640
  embedding is kept in f32; the output matmul is done in f64 by slices of the vocabulary).

What it compares, per model M and text T, on the tokens stored in
tests/fixtures/logits/M.T.gguf (tensor `tokens`, see make_logit_fixtures.py):
  f64   this file's forward pass. Weights dequantised by gguf.quants.dequantize (f32 values:
        d*q (+m) products, exact or within 1 f32 ulp), then everything in float64: RMSNorm,
        RoPE, softmax attention, exact SiLU / GELU (tanh form), tied output.
  ours  ./build/strata-worker --model M --kv f32 --threads 1 --tokens-file F --dump-logits O
        (f32 activations, f32 KV cache).
  lcpp  the fixture's rows (llama.cpp CPU, f32 KV cache, flash attention off): argmax of every
        position, the 32 largest logits of every position (top_ids / top_logits) and the full
        rows at full_pos. "lcpp-f64" is measured over these stored entries only; "ours-f64"
        over every entry of every row, and also over lcpp's entries (like for like).
A row whose f64 top-1 / top-2 gap is smaller than an engine's error can flip its argmax
without any bug: the count of such rows is printed.

Architecture, written from the GGUF metadata and model cards and checked against llama.cpp's
graph (src/models/gemma3.cpp and the llama builder, read, not copied; --lcpp-f32 checks it
numerically):
  llama (SmolLM2): x = emb[tok]; per layer: h = rms(x)*attn_norm; q,k,v = W h; RoPE "normal"
    (pairs 2i, 2i+1), theta = pos * base^(-2i/hd), base = llama.rope.freq_base (1e5);
    causal softmax(q.k / sqrt(hd)) v with GQA (query head h uses KV head h / (n_head/n_kv));
    x += Wo att; g = rms(x)*ffn_norm; x += Wdown (silu(Wgate g) * Wup g);
    logits = token_embd @ (rms(x)*output_norm) (tied: there is no output.weight).
  gemma3: x = emb[tok] * sqrt(dim) (the sqrt rounded to f32, as both engines do); per layer:
    h = rms(x)*attn_norm; q,k,v = W h; per-head RMSNorm of q and k (attn_{q,k}_norm; the GGUF
    norm weights already hold Gemma's 1+w) BEFORE RoPE; RoPE NEOX (pairs i, i+hd/2); layers
    il % 6 < 5 are local: base 10000 and keys p-511..p only (sliding_window 512); the others
    global: base gemma3.rope.freq_base (1e6), all keys; scale 1/sqrt(key_length = 256);
    x += rms(Wo att)*post_attention_norm; g = rms(x)*ffn_norm;
    x += rms(Wdown (gelu_tanh(Wgate g) * Wup g))*post_ffw_norm; final rms * output_norm,
    tied output, no logit soft-capping (llama.cpp applies one only to the non-SWA variant).

Findings when this was written (llama.cpp = llama-cpp-python 0.3.36 on AVX-512):
  ours-f64 <= 2e-4 on prose/code (<= 9e-4 on long.txt, window included), argmax equal
  everywhere; llama.cpp-f64 0.7 to 2.2 with argmax equal at 90-98%. llama.cpp on the
  f32-dequantised copy: 4e-5 (SmolLM2), 0.01-0.02 (Gemma 3: its f16 GELU table); with only
  token_embd kept Q8_0, llama.cpp moves by 0.5 and the q8_0 emulation reproduces that to
  ~1e-5 rms. So the distance between our engine and llama.cpp's fixtures on these models is
  llama.cpp's 8-bit activation rounding, not an error in our forward pass.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as QT  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FILES = {"smollm2": "smollm2-135m-instruct-q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}


# ---- model loading ----------------------------------------------------------------------------

class Model:
    """Metadata and dequantised weights (f32 numpy arrays, shape [ne1][ne0]);
    qtype[name] is the GGUF type of each tensor (for --emulate-lcpp)."""

    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.arch = r.fields["general.architecture"].contents()
        A = self.arch
        kv = {k: f.contents() for k, f in r.fields.items()
              if not k.startswith("tokenizer.") and not k.startswith("GGUF.")}
        self.dim = int(kv[f"{A}.embedding_length"])
        self.n_layer = int(kv[f"{A}.block_count"])
        self.n_head = int(kv[f"{A}.attention.head_count"])
        self.n_kv = int(kv[f"{A}.attention.head_count_kv"])
        self.hd = int(kv.get(f"{A}.attention.key_length", self.dim // self.n_head))
        self.eps = float(kv[f"{A}.attention.layer_norm_rms_epsilon"])
        self.base = float(kv.get(f"{A}.rope.freq_base", 10000.0))
        self.window = int(kv.get(f"{A}.attention.sliding_window", 0))
        for k in kv:
            if "rope.scaling" in k or "softcapping" in k:
                raise SystemExit(f"numpy_real.py: {path} has {k}, which this reference does not model")
        self.t = {}
        self.qtype = {}
        self.qmin = {}  # Q4_1 / Q5_1: each block's m, [rows][blocks] (for --emulate-lcpp)
        for ten in r.tensors:
            qt = QT(int(ten.tensor_type))
            raw = np.asarray(ten.data)
            if qt in (QT.Q4_1, QT.Q5_1):  # block = f16 d, f16 m, ...
                bs = 20 if qt == QT.Q4_1 else 24
                b = raw.reshape(raw.shape[0], -1, bs)
                self.qmin[ten.name] = np.ascontiguousarray(b[:, :, 2:4]).view(np.float16)[:, :, 0].astype(np.float64)
            w = gguf.quants.dequantize(raw, qt)
            shape = [int(x) for x in ten.shape][::-1]
            self.t[ten.name] = np.ascontiguousarray(w.reshape(shape), dtype=np.float32)
            self.qtype[ten.name] = qt
        self.n_vocab = self.t["token_embd.weight"].shape[0]
        self.out_name = "output.weight" if "output.weight" in self.t else "token_embd.weight"


# ---- ops ------------------------------------------------------------------------------------

# The float64 building blocks are numpy_ref.py's (the random-weight models' reference), one copy.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from numpy_ref import gelu_f16_table, gelu_tanh, rmsnorm, rope  # noqa: E402


# ggml's activation ("vec_dot") type for each weight type on CPU
VEC_DOT = {QT.Q4_0: "q8_0", QT.Q5_0: "q8_0", QT.Q8_0: "q8_0", QT.Q4_1: "q8_1", QT.Q5_1: "q8_1",
           QT.Q2_K: "q8_K", QT.Q3_K: "q8_K", QT.Q4_K: "q8_K", QT.Q5_K: "q8_K", QT.Q6_K: "q8_K"}


def quant_act(x, kind):
    """x [n][k] (f64) -> (the values ggml's x86 quantiser of `kind` represents [n][k] f64,
    for q8_1 also the block sums it stores: s = fp16(d * sum(q)) [n][k/32], else None).
    q8_0 / q8_1 (AVX2 code): blocks of 32, amax = max|x| (f32), d = amax/127, id = 127/amax,
    q = round-half-even(x*id) in f32, value q*fp16(d).
    q8_K: blocks of 256, iscale = -127/max where max is the signed value of largest magnitude,
    q = min(127, round-half-even(iscale*x)), value q * f32(1/iscale)."""
    xf = x.astype(np.float32)
    n, k = xf.shape
    if kind in ("q8_0", "q8_1"):
        b = xf.reshape(n, k // 32, 32)
        amax = np.abs(b).max(axis=2, keepdims=True)
        d = amax / np.float32(127)
        with np.errstate(divide="ignore", invalid="ignore"):
            idd = np.where(amax != 0, np.float32(127) / amax, np.float32(0)).astype(np.float32)
        q = np.rint(b * idd)
        dh = d.astype(np.float16).astype(np.float64)
        vals = (q.astype(np.float64) * dh).reshape(n, k)
        if kind == "q8_0":
            return vals, None
        sums = (d[..., 0] * q.sum(axis=2, dtype=np.float32)).astype(np.float16).astype(np.float64)
        return vals, sums
    if kind == "q8_K":
        b = xf.reshape(n, k // 256, 256)
        ia = np.abs(b).argmax(axis=2)[..., None]
        mx = np.take_along_axis(b, ia, axis=2)  # signed value of largest magnitude
        out = np.zeros_like(b, dtype=np.float64)
        nz = (mx != 0)[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            iscale = np.float32(-127.0) / mx
            q = np.rint(iscale * b)  # nearest_int: round half to even via the magic-number trick
            q = np.minimum(q, 127)
            d = (np.float32(1) / iscale).astype(np.float32)
        out = q.astype(np.float64) * d.astype(np.float64)
        out[~nz] = 0.0
        return out.reshape(n, k), None
    raise ValueError(kind)


# ---- forward ----------------------------------------------------------------------------------

def forward(M, tokens, act8=None, gelu16=False, sel=None, mutate=""):
    """tokens [n] -> logits [n][n_vocab] f64. act8: None, or a predicate on tensor names: the
    input of a matmul with such a (quantised) weight is rounded to 8 bits as llama.cpp does;
    gelu16: ggml's f16 GELU table.
    sel: positions whose rows are returned ([len(sel)][n_vocab]); default all.
    mutate: one deliberate architecture error (see MUTATIONS), to show how far such an error
    would move the logits (i.e. that the agreement this file measures can tell)."""
    t = M.t
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    gemma = M.arch == "gemma3"
    neox = (M.arch != "llama") != (mutate == "rope-pairs")

    def mm(x, name):
        w = t[name]
        if not (act8 and act8(name) and M.qtype[name] in VEC_DOT):
            return x @ w.astype(np.float64).T
        xq, sums = quant_act(x, VEC_DOT[M.qtype[name]])
        y = xq @ w.astype(np.float64).T
        if sums is not None:
            # ggml's q4_1 x q8_1 dot: sum_b d_w d_x sum(q_w q_x) + m_b * s_b, with s_b = fp16(d_x sum q_x)
            # where the line above has m_b * fp16(d_x) * sum(q_x): add the difference
            mine = xq.reshape(xq.shape[0], -1, 32).sum(axis=2)
            y += (sums - mine) @ M.qmin[name].T
        return y

    x = t["token_embd.weight"][tokens].astype(np.float64)  # [n][dim]
    if gemma and mutate != "emb-scale":
        x = x * float(np.sqrt(np.float32(M.dim)))
    qi = np.arange(n)[:, None]
    ki = np.arange(n)[None, :]
    causal = ki <= qi
    for il in range(M.n_layer):
        p = f"blk.{il}."
        local = gemma and M.window > 0 and il % 6 < 5
        base = 10000.0 if local and mutate != "local-base" else M.base
        mask = causal & ((qi - ki) < M.window) if local and mutate != "no-window" else causal
        h = rmsnorm(x, t[p + "attn_norm.weight"], M.eps)
        q = mm(h, p + "attn_q.weight").reshape(n, M.n_head, M.hd)
        k = mm(h, p + "attn_k.weight").reshape(n, M.n_kv, M.hd)
        v = mm(h, p + "attn_v.weight").reshape(n, M.n_kv, M.hd)
        if p + "attn_q_norm.weight" in t and mutate != "qk-norm-after-rope":
            q = rmsnorm(q, t[p + "attn_q_norm.weight"], M.eps)
            k = rmsnorm(k, t[p + "attn_k_norm.weight"], M.eps)
        q = rope(q, pos, base, neox)
        k = rope(k, pos, base, neox)
        if p + "attn_q_norm.weight" in t and mutate == "qk-norm-after-rope":
            q = rmsnorm(q, t[p + "attn_q_norm.weight"], M.eps)
            k = rmsnorm(k, t[p + "attn_k_norm.weight"], M.eps)
        scale = 1.0 / math.sqrt(M.dim / M.n_head if mutate == "scale" else M.hd)
        att = np.empty((n, M.n_head, M.hd))
        group = M.n_head // M.n_kv
        for hh in range(M.n_head):
            kh = hh // group
            s = (q[:, hh, :] @ k[:, kh, :].T) * scale
            s = np.where(mask, s, -np.inf)
            s = s - s.max(axis=1, keepdims=True)
            e = np.exp(s)
            e /= e.sum(axis=1, keepdims=True)
            att[:, hh, :] = e @ v[:, kh, :]
        o = mm(att.reshape(n, M.n_head * M.hd), p + "attn_output.weight")
        if gemma:
            o = rmsnorm(o, t[p + "post_attention_norm.weight"], M.eps)
        x = x + o
        g = rmsnorm(x, t[p + "ffn_norm.weight"], M.eps)
        a = mm(g, p + "ffn_gate.weight")
        u = mm(g, p + "ffn_up.weight")
        if gemma:
            act = gelu_f16_table(a) if gelu16 else gelu_tanh(a)
        else:
            act = a / (1.0 + np.exp(-a))
        f = mm(act * u, p + "ffn_down.weight")
        if gemma:
            f = rmsnorm(f, t[p + "post_ffw_norm.weight"], M.eps)
        x = x + f
    if sel is not None:
        x = x[sel]
    xn = rmsnorm(x, t["output_norm.weight"], M.eps)
    if act8 and act8(M.out_name) and M.qtype[M.out_name] in VEC_DOT:
        xn = quant_act(xn, VEC_DOT[M.qtype[M.out_name]])[0]  # Q8_0 -> q8_0: no block sums
    W = t[M.out_name]
    out = np.empty((xn.shape[0], M.n_vocab))
    step = 16384
    for v0 in range(0, M.n_vocab, step):
        out[:, v0:v0 + step] = xn @ W[v0:v0 + step].astype(np.float64).T
    return out


# ---- fixtures and the engine ------------------------------------------------------------------

# deliberate errors for --mutations: name -> (architectures it applies to, what it changes)
MUTATIONS = {
    "rope-pairs": (("llama", "gemma3"), "RoPE pairs (i, i+hd/2) for llama, (2i, 2i+1) for gemma3"),
    "no-window": (("gemma3",), "no sliding window on the local layers"),
    "local-base": (("gemma3",), "local layers use the global RoPE base"),
    "scale": (("gemma3",), "attention scale 1/sqrt(dim/n_head) instead of 1/sqrt(key_length)"),
    "emb-scale": (("gemma3",), "no sqrt(dim) embedding scale"),
    "qk-norm-after-rope": (("gemma3",), "QK-norm after RoPE instead of before"),
}


def read_fixture(path):
    r = gguf.GGUFReader(path)
    f = {}
    for ten in r.tensors:
        shape = [int(x) for x in ten.shape][::-1]
        f[ten.name] = np.array(ten.data).reshape(shape)
    f["model_sha256"] = r.fields["strata.model_sha256"].contents()
    return f


def run_engine(model_path, tokens, sel):
    """strata-worker on tokens (f32 KV cache, 1 thread) -> the rows at positions sel, f64."""
    exe = os.path.join(REPO, "build", "strata-worker")
    if not os.path.isfile(exe):
        raise SystemExit("numpy_real.py: build/strata-worker missing; run make build/strata-worker")
    with tempfile.TemporaryDirectory() as d:
        tf = os.path.join(d, "tokens.txt")
        of = os.path.join(d, "rows.bin")
        with open(tf, "w") as fh:
            fh.write(" ".join(str(int(x)) for x in tokens) + "\n")
        subprocess.run([exe, "--model", model_path, "--kv", "f32", "--threads", "1",
                        "--tokens-file", tf, "--dump-logits", of], check=True,
                       stdout=subprocess.DEVNULL)
        raw = np.fromfile(of, dtype="<i4", count=2)
        V, n = int(raw[0]), int(raw[1])
        if n != len(tokens):
            raise SystemExit(f"numpy_real.py: the engine dumped {n} rows for {len(tokens)} tokens")
        mm = np.memmap(of, dtype="<f4", mode="r", offset=8, shape=(n, V))
        rows = np.array(mm[sel], dtype=np.float64)
        del mm
    return rows


def write_f32_copy(src, M, out, keep=lambda nm: False):
    """Write `out`: the GGUF `src` with every tensor for which keep(name) is false replaced by its
    dequantised f32 values (the same values this file's forward pass uses); the kept ones are
    copied in their original format, and so is all metadata."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(out, M.arch)
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        vt = f.types[0]
        sub = f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
        val = f.contents()
        if k == "general.file_type":
            val = 0  # ALL_F32
        w.add_key_value(k, val, vt, sub_type=sub)
    for ten in r.tensors:
        if keep(ten.name) and M.qtype[ten.name] in VEC_DOT:
            w.add_tensor(ten.name, np.asarray(ten.data), raw_dtype=M.qtype[ten.name])
        else:
            w.add_tensor(ten.name, M.t[ten.name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def run_lcpp_f32(f32_path, tokens, sel):
    """llama.cpp (llama-cpp-python, through lcpp.py) on the f32 copy: CPU, f32 KV cache, flash
    attention off, batches of 512 -> the rows at positions sel, f64."""
    sys.path.insert(0, HERE)
    import lcpp
    lcpp.quiet()
    m = lcpp.Model(f32_path)
    try:
        ctx = m.context(max(1024, len(tokens)), type_k=lcpp.F32, type_v=lcpp.F32, flash_attn=lcpp.FA_OFF,
                        n_threads=1, n_batch=512, n_ubatch=512)
        try:
            return ctx.decode([int(x) for x in tokens], 0, True)[sel].astype(np.float64)
        finally:
            ctx.close()
    finally:
        m.close()


def lcpp_entries(fx, sel):
    """Every logit the fixture stores for the positions in sel (sorted):
    (row index into sel, token id, llama.cpp logit)."""
    where = {int(p): j for j, p in enumerate(sel)}
    R, I, L = [], [], []
    top_ids, top_logits = fx["top_ids"][sel], fx["top_logits"][sel]
    R.append(np.repeat(np.arange(len(sel)), top_ids.shape[1]))
    I.append(top_ids.reshape(-1))
    L.append(top_logits.reshape(-1))
    for j, p in enumerate(fx["full_pos"]):
        if int(p) in where:
            V = fx["full_rows"].shape[1]
            R.append(np.full(V, where[int(p)]))
            I.append(np.arange(V))
            L.append(fx["full_rows"][j])
    return np.concatenate(R), np.concatenate(I).astype(np.int64), np.concatenate(L).astype(np.float64)


def gaps(rows):
    s = np.partition(rows, -2, axis=1)
    return s[:, -1] - s[:, -2]


def rms(d):
    return math.sqrt(np.mean(d ** 2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--texts", default="prose,code")
    ap.add_argument("--cache", default=os.environ.get("STRATA_CACHE", os.path.expanduser("~/.cache/strata")))
    ap.add_argument("--no-engine", action="store_true")
    ap.add_argument("--emulate-lcpp", action="store_true")
    ap.add_argument("--max-tokens", type=int, default=0)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--lcpp-f32", action="store_true")
    ap.add_argument("--keep-quant", default="")
    ap.add_argument("--mutations", action="store_true")
    a = ap.parse_args()
    table = []
    for key in a.models.split(","):
        path = os.path.join(a.cache, FILES[key])
        if not os.path.isfile(path):
            raise SystemExit(f"numpy_real.py: {path} missing; run tests/ref/fetch_models.sh")
        M = Model(path)
        tmpdir = tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) if a.lcpp_f32 else None
        keep_subs = [x for x in a.keep_quant.split(",") if x]
        keep = lambda nm: any(x in nm for x in keep_subs)  # noqa: E731
        if a.lcpp_f32:
            f32_path = os.path.join(tmpdir.name, "f32.gguf")
            write_f32_copy(path, M, f32_path, keep)
        for text in a.texts.split(","):
            fx = read_fixture(os.path.join(REPO, "tests", "fixtures", "logits", f"{key}.{text}.gguf"))
            tokens = fx["tokens"].astype(np.int64)
            if a.max_tokens:
                tokens = tokens[:a.max_tokens]
            n = len(tokens)
            sel = sorted(set(range(0, n, a.stride)) | {n - 1} | {int(p) for p in fx["full_pos"] if p < n})
            sel = np.array(sel, dtype=np.int64)
            ref = forward(M, tokens, sel=sel)  # [len(sel)][V]
            Ri, I, Ll = lcpp_entries(fx, sel)
            Rv = ref[Ri, I]
            gap = gaps(ref)
            row = {"model": key, "text": text, "n": n, "rows": len(sel)}
            d_l = np.abs(Ll - Rv)
            row["lcpp_max"] = d_l.max()
            row["lcpp_rms"] = rms(d_l)
            row["lcpp_arg"] = np.mean(fx["argmax"][sel] == ref.argmax(1))
            row["lcpp_ties"] = int(np.sum(gap < d_l.max()))
            print(f"{key}.{text} n={n} ({len(sel)} rows compared): logit range f64 "
                  f"[{ref.min():.2f}, {ref.max():.2f}], rms {rms(ref):.3f}", flush=True)
            print(f"  lcpp-f64 (stored entries): max {row['lcpp_max']:.4g} rms {row['lcpp_rms']:.3g} "
                  f"argmax {row['lcpp_arg']:.4f} (rows whose f64 top-2 gap < that max: {row['lcpp_ties']})",
                  flush=True)
            if not a.no_engine:
                ours = run_engine(path, tokens, sel)
                d = np.abs(ours - ref)
                row["ours_max"] = d.max()
                row["ours_rms"] = rms(d)
                row["ours_arg"] = np.mean(ours.argmax(1) == ref.argmax(1))
                row["ours_sub"] = np.abs(ours[Ri, I] - Rv).max()
                row["ours_lcpp"] = np.abs(ours[Ri, I] - Ll).max()
                row["ours_lcpp_arg"] = np.mean(ours.argmax(1) == fx["argmax"][sel])
                wp = np.unravel_index(d.argmax(), d.shape)
                print(f"  ours-f64 (all entries):    max {row['ours_max']:.4g} rms {row['ours_rms']:.3g} "
                      f"argmax {row['ours_arg']:.4f} (worst at pos {sel[wp[0]]} id {wp[1]}); "
                      f"on lcpp's entries max {row['ours_sub']:.4g}", flush=True)
                print(f"  ours-lcpp (stored entries): max {row['ours_lcpp']:.4g} "
                      f"argmax {row['ours_lcpp_arg']:.4f}", flush=True)
                del ours, d
            if a.emulate_lcpp:
                emu = forward(M, tokens, act8=lambda nm: True, gelu16=M.arch == "gemma3", sel=sel)
                E = emu[Ri, I]
                row["emu_lcpp"] = np.abs(Ll - E).max()
                row["emu_f64"] = np.abs(E - Rv).max()
                print(f"  emulated-lcpp: vs lcpp max {row['emu_lcpp']:.4g} rms {rms(Ll - E):.3g} "
                      f"argmax {np.mean(emu.argmax(1) == fx['argmax'][sel]):.4f}; "
                      f"vs f64 max {row['emu_f64']:.4g} rms {rms(E - Rv):.3g} "
                      f"argmax {np.mean(emu.argmax(1) == ref.argmax(1)):.4f}", flush=True)
                del emu
            if a.lcpp_f32:
                lf = run_lcpp_f32(f32_path, tokens, sel)
                d = np.abs(lf - ref)
                what = f"copy, {a.keep_quant} quantised" if keep_subs else "f32 copy"
                row["f32_f64"] = d.max()
                row["f32_arg"] = np.mean(lf.argmax(1) == ref.argmax(1))
                print(f"  lcpp({what})-f64: max {d.max():.4g} rms {rms(d):.3g} "
                      f"argmax {row['f32_arg']:.4f}", flush=True)
                if keep_subs or M.arch == "gemma3":
                    # the same f64 pass with what llama.cpp does differently on its f32 path (gemma3:
                    # the f16 GELU table) and on the kept quantised weights (8-bit matmul inputs)
                    emu = forward(M, tokens, act8=keep if keep_subs else None,
                                  gelu16=M.arch == "gemma3", sel=sel)
                    d = np.abs(lf - emu)
                    row["f32_emu"] = d.max()
                    print(f"  lcpp({what}) vs f64 emulating that: max {d.max():.4g} rms {rms(d):.3g} "
                          f"argmax {np.mean(lf.argmax(1) == emu.argmax(1)):.4f} "
                          f"[emulation vs exact f64: max {np.abs(emu - ref).max():.4g}]", flush=True)
                    del emu
                del lf, d
            if a.mutations:
                for mname, (arches, what) in MUTATIONS.items():
                    if M.arch in arches:
                        mu = forward(M, tokens, sel=sel, mutate=mname)
                        print(f"  mutation {mname} ({what}): moves f64 by max {np.abs(mu - ref).max():.3g}, "
                              f"argmax agree {np.mean(mu.argmax(1) == ref.argmax(1)):.3f}", flush=True)
                        del mu
            table.append(row)
            del ref
        if tmpdir is not None:
            tmpdir.cleanup()
        del M
    print()
    cols = [("lcpp_max", "lcpp-f64 max"), ("lcpp_arg", "lcpp-f64 argmax"),
            ("ours_max", "ours-f64 max"), ("ours_sub", "ours-f64 max (lcpp's entries)"),
            ("ours_arg", "ours-f64 argmax"), ("ours_lcpp", "ours-lcpp max"),
            ("emu_lcpp", "emulated-lcpp max"), ("emu_f64", "emulated-f64 max"),
            ("f32_f64", "lcpp(copy)-f64 max"), ("f32_arg", "lcpp(copy)-f64 argmax"),
            ("f32_emu", "lcpp(copy)-emulated max")]
    cols = [c for c in cols if any(c[0] in r for r in table)]
    print("| model.text | n (rows) | " + " | ".join(c[1] for c in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for r in table:
        print(f"| {r['model']}.{r['text']} | {r['n']} ({r['rows']}) | " +
              " | ".join(f"{r[c[0]]:.4g}" if c[0] in r else "" for c in cols) + " |")


if __name__ == "__main__":
    main()
