#!/usr/bin/env python3
"""make_kv_fixtures.py - expected bytes of the KV formats added in issue 11, for tests/test_kv.c.

Writes tests/fixtures/kv/ (and kivi{2,4}-g16.k.bin / kivi{2,4}.v.bin: KIVI K groups of 16 tokens
and V rows of the f16 values of input rows 0..79, see kivi_fixtures below; and, for the rotated formats FMT+rot / FMT+roth, rot-input.bin and
FMT+rot.bin etc.: the same layouts at h = 128, the input values read as rows of 128, those that do
not overflow in the transform; see rotated_fixtures below; and for +rotp, rotp-input.bin and
q8_0+rotp.bin / q4_0+rotp.bin at h = 384, blocks of 128, see rotp_fixtures below):
  input.bin    "SKVI", uint32 h, uint32 rows, then rows x h f32: the head vectors (LE)
  FMT.bin      "SKVQ", uint32 h, uint32 rows, uint32 row_bytes, then rows x row_bytes: the
               expected kv_quantize(FMT, row) bytes, then rows x h f32: those bytes decoded
               (kv_dequantize's expected values), one file per format below
h = 64, rows = 160 (320 blocks of 32, 640 of 16). The rows (fixed seed; see make_rows):
  0-79     random normal at scales 10^[-3, 2] with 1-in-64 outliers x20 (K/V-like), 20 of them
           with one all-zero or one constant 32-block;
  80-159   edge cases: all zero; constants (+-, tiny, huge); +-0 mixed; f32 subnormals; 1e-20;
           magnitudes near the fp16 / e4m3 / e5m2 limits (one q4_1 / q5_1 block overflows its
           fp16 d to inf, as ggml does); exact ties of every format's rounding (k + 1/2 steps for
           the integer formats, E2M1 / e4m3 / e5m2 midpoints at scale 1); the largest magnitude
           appearing as +m and -m in one block (the first one wins); amax just below a power of
           two (0x1.fffffep+k: mxfp4's floor(log2) must not round up); values in [6, 8) x 2^E
           (mxfp4 saturation).

Where each expected byte comes from (the implementations are independent of kernels/kv.c):
  q8_0 q4_0        (the two older llama.cpp types, checked on the same rows) and
  q4_1 q5_0 q5_1   llama.cpp itself: ggml_quantize_chunk() of the libggml-base.so that
                   llama-cpp-python builds (imatrix NULL = quantize_row_*_ref), called through
                   ctypes; ALSO required equal to gguf.quants.quantize() (PyPI gguf), else the
                   script stops.
  iq4_nl           iq4nl_ref() below: a float32 transliteration of what llama.cpp's CPU KV
                   cache writes, ggml's quantize_row_iq4_nl_ref (NO scale search; NOT
                   ggml_quantize_chunk's quantize_iq4_nl, the model-file quantiser with its
                   7-step search, which differs on 124 of the 160 rows); ALSO required equal to
                   ggml's own row quantiser when one is found (load_iq4nl_row: llama-cpp-python's
                   libggml-cpu quantize_row_iq4_nl, the cache's from_float, or libggml-base's
                   quantize_row_iq4_nl_ref, or GGML_QUANTS_LIB=PATH), called once per row, the
                   indices of d = 0 blocks not compared (ggml leaves them stale). The gguf package
                   only dequantises IQ4_NL.
  e5m2 e4m3s e5m2s nvfp4 mxfp4
                   the spec implementations below in float64 / exact arithmetic (nearest value of
                   the format's table, ties to the even code, saturation), from kv.h's definitions:
                   the OCP 8-bit floating point spec (E4M3 / E5M2), NVIDIA's NVFP4 (E2M1 elements,
                   E4M3 block scale per 16, per-tensor scale fixed at 1.0) and the OCP Microscaling
                   spec v1.0 (MXFP4: E2M1 elements, E8M0 scale per 32, X = floor(log2 amax) - 2).
                   mxfp4 is also compared with gguf's MXFP4 quantiser (and ggml's), which pick the
                   FIRST nearest value on ties (not the even one: and +0 for -0), take
                   floor(log2f(amax)) through a rounded log2f, and let the uint8 exponent wrap
                   for amax < 2^-125 (the spec clamps it at 2^-127): the script prints how many
                   blocks differ and checks that every difference is one of those cases.
The decoded values: gguf.quants.dequantize() for the six ggml types (ggml's layouts); the
spec tables below times the scale (one f32 product; exact for nvfp4 and mxfp4) for the others,
mxfp4's also required equal to gguf.quants.dequantize() up to the sign of zero (gguf's table has
no -0).
Without llama-cpp-python (tests/.venv per tests/ref/README.md) the llama.cpp columns fall back
to the gguf package and iq4nl_ref, and the script says so; the committed files were made WITH it,
except iq4_nl.bin: regenerated for issue 22 without llama-cpp-python, from iq4nl_ref, checked
equal (320/320 blocks) to quantize_row_iq4_nl_ref of ggml-quants.c from llama-cpp-python
0.3.36's sources compiled alone into a small library (GGML_QUANTS_LIB; gcc -O2 -fPIC -shared,
with and without -march=native, and four stubs that abort for the ggml_abort, ggml_row_size,
ggml_type_name and ggml_type_size it links against but does not call here), the other files left
as they were (without llama-cpp-python the gguf package's
q4_0 q4_1 q5_0 q5_1 differ in the sign of some zero d / m: do not commit those).

Rerun (from the repository root):
    tests/.venv/bin/python tests/ref/make_kv_fixtures.py
Made with gguf 0.19.0, numpy 2.4, llama-cpp-python 0.3.36; rerunning gives identical files.
"""
import ctypes
import glob
import math
import os
import struct
import sys
from bisect import bisect_left

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

H, N_RANDOM, N_EDGE = 64, 80, 80
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "kv")
f32 = np.float32


# ---- the rows --------------------------------------------------------------------------------

def make_rows():
    rng = np.random.default_rng(20261211)
    rows = []
    for i in range(N_RANDOM):
        scale = 10.0 ** rng.uniform(-3, 2)
        x = rng.standard_normal(H) * scale
        x = np.where(rng.integers(0, 64, H) == 0, x * 20, x)
        if i % 4 == 1:
            x[32 * (i // 4 % 2):][:32] = 0.0                      # one all-zero block
        elif i % 4 == 3:
            x[32 * (i // 4 % 2):][:32] = x[0] if i // 4 % 2 else x[40]   # one constant block
        rows.append(x.astype(f32))

    e = []
    e.append(np.zeros(H))
    e.append(np.full(H, 0.75))
    e.append(np.full(H, -3.0))
    e.append(np.full(H, 1e-30))
    e.append(np.full(H, -60000.0))
    e.append(np.array([0.0, -0.0] * 32) * np.resize([1, 1, -1], H))
    e.append(np.resize([1e-40, -3e-45, 0.0, 1.17549435e-38, -1.1754942e-38], H))  # f32 subnormals
    e.append(np.resize([1e-20, -2e-20, 3e-20, 0.0], H))
    # fp16 limits for d and m; block 1 has max - min > 15 * 65504: d is inf in fp16 (ggml too)
    e.append(np.concatenate([np.linspace(-65504, 65504, 32), np.linspace(-600000, 600000, 32)]))
    e.append(np.resize([448.0, -448.0, 449.0, 464.0, 480.0, 1e6, -1e38, 3e38], H))
    e.append(np.resize([57344.0, -57344.0, 61439.0, 61440.0, 1e5, -3e38, 0.5, 2.0], H))
    # k + 1/2 ties: q4_1 / q5_1 with min = 0 and d = 1 (max 15 / 31); q5_0 with m = -16 (d = 1)
    e.append(np.concatenate([np.r_[np.arange(15) + 0.5, 0.0, 15.0, np.arange(15) + 0.25],
                             np.r_[np.arange(31) + 0.5, 31.0]]))
    e.append(np.concatenate([np.r_[-16.0, np.arange(-15, 16) + 0.5],
                             np.r_[-16.0, -(np.arange(31) * 0.5 + 0.25)]]))
    # first of +m / -m wins (q5_0, iq4_nl); then the reverse
    e.append(np.concatenate([np.r_[3.0, -3.0, np.linspace(-2.9, 2.9, 30)],
                             np.r_[-3.0, 3.0, np.linspace(2.9, -2.9, 30)]]))
    # E2M1 midpoints at scale 1 (amax 6: nvfp4 s = e4m3(1) = 1, mxfp4 E = 0), both signs
    mids = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    e.append(np.resize(np.r_[6.0, mids, [-m for m in mids]], H))
    e.append(np.resize(np.r_[6.0, 0.2, 0.26, 0.74, 0.76, 5.1, 5.9, -0.1, -0.0, 0.0, -5.5, 4.9], H))
    # e4m3 midpoints at scale 1 (amax 448: e4m3s s = 1): 1 + k/16 and 2^-9 * (k + 1/2), and
    # e5m2 midpoints: 1 + (2k+1)/8, 2^-16 * (k + 1/2)
    e.append(np.resize(np.r_[448.0, [1 + k / 16 for k in range(1, 16, 2)],
                             [2.0 ** -9 * (k + 0.5) for k in range(8)],
                             [-(1 + k / 16) for k in range(1, 16, 2)]], H))
    e.append(np.resize(np.r_[57344.0, [1 + k / 8 for k in range(1, 8, 2)],
                             [2.0 ** -16 * (k + 0.5) for k in range(4)], [-(2 + k / 4) for k in range(1, 8, 2)],
                             [61440.0, 53248.0, 55296.0]], H))
    # amax just below a power of two, and mxfp4 saturation (x / 2^E in [6, 8))
    e.append(np.resize([float.fromhex("0x1.fffffep+3"), 7.0, -6.5, 6.0, 5.0, 1.0], H))
    e.append(np.resize([float.fromhex("0x1.fffffep-1"), float.fromhex("0x1.fffffep+9"), 3.9, -7.99, 0.1], H))
    e.append(np.resize([2.0 ** -130, 2.0 ** -128, -2.0 ** -131, 0.0], H))
    e.append(np.resize([float.fromhex("0x1.8p-10"), float.fromhex("0x1.8p-11"), 0.004], H))
    # nvfp4 scale rounding: amax / 6 on e4m3 ties and just beside them
    e.append(np.resize([6 * 1.0625, 6 * 1.1875, -6 * 1.0625 * 1.0000001, 6 * 2.0 ** -10,
                        6 * 1.5 * 2.0 ** -10, 0.5, 3.0], H))
    # ramps of different widths
    for k in range(len(e), N_EDGE):
        r = np.random.default_rng(k)
        lo, hi = sorted(r.uniform(-10, 10, 2) * 10.0 ** r.uniform(-4, 3))
        x = np.linspace(lo, hi, H)
        r.shuffle(x)
        e.append(x)
    rows += [np.asarray(x, dtype=np.float64).astype(f32) for x in e[:N_EDGE]]
    assert len(rows) == N_RANDOM + N_EDGE
    return np.stack(rows).astype(f32)


# ---- llama.cpp (ggml) through ctypes ---------------------------------------------------------

def load_ggml():
    try:
        import llama_cpp
    except ImportError:
        return None
    libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    cands = sorted(glob.glob(os.path.join(libdir, "libggml-base.so*"))) or \
        sorted(glob.glob(os.path.join(libdir, "libggml.so*")))
    if not cands:
        return None
    lib = ctypes.CDLL(cands[0])
    f = lib.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_int64, ctypes.c_void_p]
    return lib


def load_iq4nl_row():
    """llama.cpp's KV-cache writer for iq4_nl, as (description, C function) or None: ggml-cpu's
    quantize_row_iq4_nl (the type's from_float, what a copy into an iq4_nl cache calls; it calls
    quantize_row_iq4_nl_ref) from llama-cpp-python's libggml-cpu, else quantize_row_iq4_nl_ref
    from its libggml-base; GGML_QUANTS_LIB=PATH names a library that exports
    quantize_row_iq4_nl_ref instead (e.g. ggml's ggml-quants.c compiled alone)."""
    cands = []
    if os.environ.get("GGML_QUANTS_LIB"):
        cands.append((os.environ["GGML_QUANTS_LIB"], "quantize_row_iq4_nl_ref"))
    else:
        try:
            import llama_cpp
            libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
            cands += [(p, "quantize_row_iq4_nl") for p in sorted(glob.glob(os.path.join(libdir, "libggml-cpu*.so*")))]
            cands += [(p, "quantize_row_iq4_nl_ref") for p in sorted(glob.glob(os.path.join(libdir, "libggml-base.so*")))]
        except ImportError:
            pass
    for path, sym in cands:
        try:
            f = getattr(ctypes.CDLL(path), sym)
        except (OSError, AttributeError):
            continue
        f.restype = None
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        return f"{sym} of {os.path.basename(path)}", f
    return None


def ggml_iq4nl_rows(f, x):
    """x [rows, h] -> [rows, h / 32 * 18]: f called once per row (k = h), as the cache copy does."""
    rows, h = x.shape
    src = np.ascontiguousarray(x, dtype=f32)
    dst = np.zeros((rows, h // 32 * 18), dtype=np.uint8)
    for r in range(rows):
        f(src[r].ctypes.data, dst[r].ctypes.data, h)
    return dst


def ggml_quantize(lib, qtype, x):
    rows, h = x.shape
    bs, ts = gguf.constants.GGML_QUANT_SIZES[qtype]
    src = np.ascontiguousarray(x, dtype=f32)
    dst = np.zeros((rows, h // bs * ts), dtype=np.uint8)
    n = lib.ggml_quantize_chunk(int(qtype), src.ctypes.data, dst.ctypes.data, 0, rows, h, None)
    assert n == dst.size, (qtype, n, dst.size)
    return dst


# ---- iq4_nl: llama.cpp's cache quantiser (quantize_row_iq4_nl_ref) in float32 ------------------

IQ4NL = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]


def best_index(a):
    """ggml's best_index_int8 over IQ4NL, float32 comparisons."""
    a = f32(a)
    if a <= f32(IQ4NL[0]):
        return 0
    if a >= f32(IQ4NL[15]):
        return 15
    lo, hi = 0, 15
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a < f32(IQ4NL[mid]):
            hi = mid
        else:
            lo = mid
    return hi - 1 if f32(a - f32(IQ4NL[hi - 1])) < f32(f32(IQ4NL[hi]) - a) else hi


def iq4nl_block(xb):
    """one block of 32 float32 values -> 18 bytes, as llama.cpp's CPU cache stores it:
    quantize_row_iq4_nl -> quantize_row_iq4_nl_ref, i.e. quantize_row_iq4_nl_impl with no
    importance weights and ntry = -1 (NO scale search): d0 = m / K[0] (m the first value of
    largest magnitude), the indices L of x / d0 (x * f32(1 / d0)), then d = sum w K x / sum w K^2
    with w = x^2 over those indices; L is kept as found with d0. A block with amax < 1e-15 gets
    d = 0 and L = 8 (ggml leaves L as the block before left it; every value decodes to 0)."""
    with np.errstate(all="ignore"):
        amax, m = f32(0), f32(0)
        for v in xb:
            if abs(v) > amax:
                amax, m = abs(v), v
        d = f32(0)
        L = [8] * 32
        if amax >= f32(1e-15):
            idd = f32(f32(1) / f32(m / f32(IQ4NL[0])))
            sqx = sq2 = f32(0)
            for j in range(32):
                w = f32(xb[j] * xb[j])
                L[j] = best_index(f32(idd * xb[j]))
                q = f32(IQ4NL[L[j]])
                sqx = f32(sqx + f32(f32(w * q) * xb[j]))
                sq2 = f32(sq2 + f32(f32(w * q) * q))
            d = f32(sqx / sq2)
    out = bytearray(np.array([d], dtype=np.float16).view(np.uint8).tobytes())
    out += bytes(L[j] | L[j + 16] << 4 for j in range(16))
    return bytes(out)


def iq4nl_ref(x):
    rows, h = x.shape
    return np.frombuffer(b"".join(iq4nl_block(x[r, 32 * b:32 * b + 32]) for r in range(rows)
                                  for b in range(h // 32)), dtype=np.uint8).reshape(rows, -1)


# ---- minifloats: nearest table value, ties to the even code, saturation ------------------------

def minifloat_table(ebits, mbits, bias, n_codes):
    """values of the non-negative codes 0..n_codes-1 (finite ones), exact in float64."""
    vals = []
    for c in range(n_codes):
        e, m = c >> mbits, c & ((1 << mbits) - 1)
        vals.append(m * 2.0 ** (1 - bias - mbits) if e == 0 else (1 + m / 2 ** mbits) * 2.0 ** (e - bias))
    assert all(a < b for a, b in zip(vals, vals[1:]))
    return vals


E4M3 = minifloat_table(4, 3, 7, 0x7f)     # 0x7f is NaN; largest 448
E5M2 = minifloat_table(5, 2, 15, 0x7c)    # 0x7c is inf; largest 57344
E2M1 = minifloat_table(2, 1, 1, 8)        # largest 6


def encode(v, table, sign_bit):
    """RNE of the real v (a float64 holding the exact value) to the table, saturating."""
    v = float(v)
    sign = sign_bit if math.copysign(1.0, v) < 0 else 0
    if math.isnan(v):
        return sign | (7 if table is E2M1 else 0x7f)
    a = abs(v)
    if a >= table[-1]:
        return sign | (len(table) - 1)
    i = bisect_left(table, a)                 # table[i-1] < a <= table[i]
    if table[i] == a:
        return sign | i
    lo, hi = table[i - 1], table[i]
    mid = (lo + hi) / 2                       # exact: both have few significant bits
    if a < mid:
        c = i - 1
    elif a > mid:
        c = i
    else:
        c = i - 1 if (i - 1) % 2 == 0 else i
    return sign | c


def dec(code, table, sign_bit):
    v = table[code & (sign_bit - 1)]
    return -v if code & sign_bit else v


def spec_e5m2(x):
    return np.array([[encode(v, E5M2, 0x80) for v in row] for row in x], dtype=np.uint8)


def spec_scaled(x, table, fmax):
    out = []
    for row in x:
        amax = f32(np.max(np.abs(row)))
        s = f32(amax / f32(fmax))
        with np.errstate(all="ignore"):
            q = [0 if s == 0 else encode(f32(v / s), table, 0x80) for v in row]
        out.append(bytes(q) + struct.pack("<f", s))
    return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(len(x), -1)


def spec_nvfp4(x):
    out = []
    for row in x:
        for b in range(0, len(row), 16):
            xb = row[b:b + 16]
            amax = f32(np.max(np.abs(xb)))
            sc = encode(f32(amax / f32(6)), E4M3, 0x80)
            s = f32(dec(sc, E4M3, 0x80))
            with np.errstate(all="ignore"):
                q = [0 if s == 0 else encode(f32(v / s), E2M1, 8) for v in xb]
            out.append(bytes([sc]) + bytes(q[j] | q[j + 8] << 4 for j in range(8)))
    return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(len(x), -1)


def mx_exponent(amax):
    """floor(log2(amax)) - 2, exact (frexp), clamped to [-127, 127]; -127 for 0."""
    if amax == 0:
        return -127
    if math.isinf(amax):
        return 127
    _, ex = math.frexp(float(amax))           # amax = f * 2^ex, f in [0.5, 1)
    return max(-127, min(127, ex - 1 - 2))


def spec_mxfp4(x):
    out = []
    for row in x:
        for b in range(0, len(row), 32):
            xb = row[b:b + 32]
            E = mx_exponent(f32(np.max(np.abs(xb))))
            q = [encode(float(v) * 2.0 ** -E, E2M1, 8) for v in xb]
            out.append(bytes([E + 127]) + bytes(q[j] | q[j + 16] << 4 for j in range(16)))
    return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(len(x), -1)


def only_zero_sign(x, a, b, name):
    """1 if rows a and b (bytes) differ only in fp16 fields that are +-0 in both, on blocks of +-0."""
    bs = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}[name]
    fields = {"q8_0": [0], "q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2]}[name]
    for blk in range(len(a) // bs):
        ab, bb = bytes(a[blk * bs:(blk + 1) * bs]), bytes(b[blk * bs:(blk + 1) * bs])
        if ab == bb:
            continue
        if np.any(x[32 * blk:32 * blk + 32] != 0):
            return 0
        for k in range(bs):
            if ab[k] != bb[k] and not any(o <= k < o + 2 and ab[o:o + 2] in (b"\0\0", b"\0\x80") and
                                          bb[o:o + 2] in (b"\0\0", b"\0\x80") for o in fields):
                return 0
    return 1


def decode_rows(name, q, h):
    """the values the bytes q [rows][row_bytes] stand for, f32 [rows][h]."""
    ggml = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1, "iq4_nl": T.IQ4_NL}
    if name in ggml:
        with np.errstate(all="ignore"):
            return gguf.quants.dequantize(q, ggml[name]).astype(f32)
    out = np.zeros((q.shape[0], h), dtype=f32)
    with np.errstate(all="ignore"):
        for r in range(q.shape[0]):
            if name == "e5m2":
                out[r] = [f32(dec(c, E5M2, 0x80)) for c in q[r]]
            elif name in ("e4m3s", "e5m2s"):
                s = np.frombuffer(q[r, h:h + 4].tobytes(), dtype="<f4")[0]
                tab = E4M3 if name == "e4m3s" else E5M2
                out[r] = [f32(f32(dec(c, tab, 0x80)) * s) for c in q[r, :h]]
            elif name == "mxfp4":
                for b in range(h // 32):
                    blk = q[r, 17 * b:17 * b + 17]
                    for j in range(32):
                        c = blk[1 + j % 16] >> (4 * (j // 16)) & 15
                        out[r, 32 * b + j] = f32(dec(c, E2M1, 8) * 2.0 ** (int(blk[0]) - 127))
            elif name == "nvfp4":
                for b in range(h // 16):
                    blk = q[r, 9 * b:9 * b + 9]
                    s = f32(dec(blk[0], E4M3, 0x80))
                    for j in range(16):
                        c = blk[1 + j % 8] >> (4 * (j // 8)) & 15
                        out[r, 16 * b + j] = f32(f32(dec(c, E2M1, 8)) * s)
    return out


def explain_mxfp4_diff(xb, ours, theirs):
    """why a block differs from ggml's MXFP4 ("wrap", "log2f", "tie", "zero"), or None."""
    ours, theirs = [int(v) for v in ours], [int(v) for v in theirs]
    E = ours[0] - 127
    amax = float(np.max(np.abs(xb)))
    if ours[0] == 0 and 0 < amax < 2.0 ** -125:
        ok = theirs[0] == (math.floor(math.log2(amax)) - 2 + 127) % 256    # ggml wraps the uint8
        return "wrap" if ok else None
    if theirs[0] != ours[0]:
        # log2f(amax) rounded up to the next integer: amax within 2^-20 below a power of two
        ok = theirs[0] == ours[0] + 1 and amax < 2.0 ** (E + 3) and amax >= 2.0 ** (E + 3) * (1 - 2.0 ** -20)
        return "log2f" if ok else None
    why = "zero"
    for j in range(32):
        a = ours[1 + j % 16] >> (4 * (j // 16)) & 15
        b = theirs[1 + j % 16] >> (4 * (j // 16)) & 15
        if a == b:
            continue
        t = float(xb[j]) * 2.0 ** -E
        va, vb = dec(a, E2M1, 8), dec(b, E2M1, 8)
        if va == 0 and vb == 0:
            continue                          # +0 / -0
        if abs(abs(t - va) - abs(t - vb)) > 0:
            return None                       # not a tie
        why = "tie"
    return why


# ---- main ------------------------------------------------------------------------------------

# ---- rotated formats (FMT+rot, FMT+roth; kvfmt.h) ----------------------------------------------
# The rotation in its defining float32 operation order (docs/DESIGN.md §3.3.11), written here as
# whole-array numpy stages: stage len = 1, 2, 4, ..., b/2 replaces each pair (a, c) = (x[j], x[j + len])
# (j in the first half of each 2*len group) by (a + c, a - c), each an IEEE f32 operation; then every
# value times float32(1 / sqrt(b)). Checked against the float64 matrix product H x / sqrt(b), H the
# Sylvester Hadamard matrix H[i][k] = (-1)^popcount(i & k).
ROT_H = 128    # the 160 x 64 input values read as 80 rows of 128, those with every |x| <= 1e4 kept
               # (the others overflow f32 in the transform): written to rot-input.bin

def fwht_f32(x, b):
    """x [rows][h] float32, each block of b values (b a power of two) rotated; returns float32."""
    rows, h = x.shape
    y = x.astype(f32).reshape(rows, h // b, b).copy()
    ln = 1
    while ln < b:
        z = y.reshape(rows, h // b, b // (2 * ln), 2, ln)
        a, c = z[:, :, :, 0, :].copy(), z[:, :, :, 1, :].copy()
        with np.errstate(all="ignore"):
            z[:, :, :, 0, :] = a + c
            z[:, :, :, 1, :] = a - c
        y = z.reshape(rows, h // b, b)
        ln *= 2
    with np.errstate(all="ignore"):
        y = y * f32(1.0 / math.sqrt(b))
    return y.reshape(rows, h).astype(f32)


def hadamard64(b):
    i = np.arange(b)
    pc = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i[None, :])
    return np.where(pc % 2 == 0, 1.0, -1.0) / math.sqrt(b)


def check_rotation(x, b):
    """the f32 rotation within float32 rounding of the float64 one on the finite rows"""
    y = fwht_f32(x, b).astype(np.float64)
    rows, h = x.shape
    ok = np.all(np.isfinite(x), axis=1)
    xr = x[ok].astype(np.float64).reshape(-1, h // b, b)
    ref = np.einsum("ik,rbk->rbi", hadamard64(b), xr).reshape(-1, h)
    scale = np.max(np.abs(xr.reshape(-1, h)), axis=1, keepdims=True) + 1e-300
    err = np.max(np.abs(y[ok] - ref) / scale)
    print(f"rotation b = {b}: max |f32 - float64| / max|x| = {err:.3g} over {int(np.sum(ok))} finite rows")
    if err > 1e-5:
        sys.exit("rotation: the float32 transform is not the Hadamard transform")


def lloyd_max(L):
    """centroids and midpoints of the L-level Lloyd-Max quantiser of N(0, 1) in float64 (iterated to
    the fixed point, made exactly symmetric), rounded to float32 for tq3 / tq4"""
    phi = lambda v: 0.0 if math.isinf(v) else math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
    Phi = lambda v: (1.0 if v > 0 else 0.0) if math.isinf(v) else 0.5 * (1 + math.erf(v / math.sqrt(2)))
    c = [(i - (L - 1) / 2) * 4.0 / L for i in range(L)]
    for _ in range(20000):
        t = [(c[i] + c[i + 1]) / 2 for i in range(L - 1)]
        lo, hi = [-math.inf] + t, t + [math.inf]
        c = [(phi(a) - phi(b)) / (Phi(b) - Phi(a)) for a, b in zip(lo, hi)]
        c = [(c[i] - c[L - 1 - i]) / 2 for i in range(L)]
    t = [(c[i] + c[i + 1]) / 2 for i in range(L - 1)]
    return np.array(c, dtype=f32), np.array(t, dtype=f32)


def spec_tq(y, bits):
    """tq3 / tq4 rows of the rotated rows y [rows][h] (float32): f32 s = sqrt((sequential sum of y^2) / h),
    codes = the number of thresholds below y / s, packed bits each; and the decoded values c[q] * s"""
    c, t = lloyd_max(1 << bits)
    rows, h = y.shape
    out, dec = [], []
    for r in range(rows):
        ss = f32(0)
        for v in y[r]:
            ss = f32(ss + f32(v * v))
        s = f32(np.sqrt(f32(ss / f32(h))))
        with np.errstate(all="ignore"):
            z = (y[r] / s).astype(f32)
        q = np.array([int(np.sum(zi > t)) for zi in z], dtype=np.uint32)
        out.append(np.concatenate([np.frombuffer(struct.pack("<f", s), dtype=np.uint8), pack(q, bits)]))
        dec.append((c[q] * s).astype(f32))
    return np.array(out), np.array(dec)


def rotated_fixtures(x, out_ggml):
    """{name: bytes [ROT_ROWS][row_bytes]} for a few rotated formats at h = ROT_H: the base quantiser of
    the rotated rows (rot: blocks of 64, roth: the whole head of 128)."""
    xr = x.reshape(-1, ROT_H)
    xr = xr[np.all(np.abs(xr) <= 1e4, axis=1)]
    check_rotation(xr, 64)
    check_rotation(xr, ROT_H)
    out = {}
    for name, base, b in (("q8_0+rot", "q8_0", 64), ("q4_0+rot", "q4_0", 64), ("q4_0+roth", "q4_0", ROT_H),
                          ("q4_1+roth", "q4_1", ROT_H), ("q5_1+rot", "q5_1", 64), ("nvfp4+rot", "nvfp4", 64),
                          ("e4m3s+roth", "e4m3s", ROT_H), ("mxfp4+roth", "mxfp4", ROT_H)):
        y = fwht_f32(xr, b)
        if base == "nvfp4":
            out[name] = (base, spec_nvfp4(y))
        elif base == "e4m3s":
            out[name] = (base, spec_scaled(y, E4M3, 448.0))
        elif base == "mxfp4":
            out[name] = (base, spec_mxfp4(y))
        else:
            out[name] = (base, out_ggml(y, base))
    y = fwht_f32(xr, ROT_H)
    for bits in (3, 4):
        out[f"tq{bits}"] = ("tq", spec_tq(y, bits))
    return xr, out


# +rotp (llama.cpp's K rotation: blocks of the largest power of two dividing h) at h = 384 = 3 x 128,
# where it is neither +rot (blocks of 64) nor +roth (no power of two): the first 75 rows of 128 of
# rot-input.bin read as 25 rows of 384, rotated in blocks of 128, then q8_0 / q4_0's quantiser.
ROTP_H, ROTP_B = 384, 128

def rotp_fixtures(xr, out_ggml):
    n = xr.shape[0] * ROT_H // ROTP_H
    x3 = np.ascontiguousarray(xr.reshape(-1)[:n * ROTP_H].reshape(n, ROTP_H))
    check_rotation(x3, ROTP_B)
    y = fwht_f32(x3, ROTP_B)
    return x3, {"q8_0+rotp": ("q8_0", out_ggml(y, "q8_0")), "q4_0+rotp": ("q4_0", out_ggml(y, "q4_0"))}


# ---- KIVI-style kivi2 / kivi4 (kernels/kivi.h) -------------------------------------------------
# From the f16 values of input rows 0..79 (h = 64): K groups of G = 16 tokens (5 groups), each
# channel quantised over its 16 values; V rows quantised per token in groups of 32 channels. The
# rule (q4_1's with 2^b - 1 levels) written with numpy float32 array arithmetic, codes packed b bits
# each from bit 0 of byte 0 upwards.
KIVI_ROWS, KIVI_G = 80, 16

def kivi_codes(z, b):
    """z [n][m] float32, quantised along axis 0 (n values per column): codes [n][m], d, mn [m]"""
    top = f32((1 << b) - 1)
    mn = z.min(axis=0).astype(f32)
    mx = z.max(axis=0).astype(f32)
    d = ((mx - mn) / top).astype(f32)
    with np.errstate(all="ignore"):
        idv = np.where(d != 0, f32(1) / np.where(d != 0, d, f32(1)), f32(0)).astype(f32)
        t = (((z - mn).astype(f32) * idv).astype(f32) + f32(0.5)).astype(f32)
    q = np.where(t > 0, np.minimum(np.trunc(np.where(t > 0, t, 0)), top), 0).astype(np.uint32)
    return q, d, mn


def pack(codes, b):
    """codes (flat, in order) packed b bits each, LSB first"""
    codes = np.asarray(codes, dtype=np.uint32).ravel()
    out = np.zeros(len(codes) * b // 8, dtype=np.uint8)
    for i, c in enumerate(codes):
        v = int(c) << ((b * i) % 8)                       # may spill into the next byte (3 bits)
        out[(b * i) // 8] |= np.uint8(v & 0xff)
        if v >> 8:
            out[(b * i) // 8 + 1] |= np.uint8(v >> 8)
    return out


def kivi_fixtures(x):
    z = x[:KIVI_ROWS].astype(np.float16).astype(f32)            # the f16 rows
    out = {}
    for b in (2, 4):
        groups, dec_k = [], []
        for gi in range(KIVI_ROWS // KIVI_G):
            zg = z[gi * KIVI_G:(gi + 1) * KIVI_G]                # [G][h]
            q, d, mn = kivi_codes(zg, b)
            d16, m16 = d.astype(np.float16), mn.astype(np.float16)
            groups.append(np.concatenate([pack(q, b), d16.view(np.uint8), m16.view(np.uint8)]))
            dec_k.append((q.astype(f32) * d16.astype(f32)).astype(f32) + m16.astype(f32))
        out[f"kivi{b}-g{KIVI_G}.k"] = (np.array(groups), np.concatenate(dec_k).astype(f32), KIVI_ROWS // KIVI_G)
        rows, dec_v = [], []
        for r in range(KIVI_ROWS):
            zr = z[r].reshape(-1, 32).T                          # [32][h / 32]: columns = groups
            q, d, mn = kivi_codes(zr, b)
            d16, m16 = d.astype(np.float16), mn.astype(np.float16)
            sc = np.stack([d16, m16], axis=1).ravel()            # per group: d, m
            rows.append(np.concatenate([pack(q.T, b), sc.view(np.uint8)]))
            dec_v.append(((q.T.astype(f32) * d16.astype(f32)[:, None]).astype(f32) + m16.astype(f32)[:, None]).ravel())
        out[f"kivi{b}.v"] = (np.array(rows), np.array(dec_v).astype(f32), KIVI_ROWS)
    return out


def write(name, h, data):
    path = os.path.join(OUT_DIR, name)
    with open(path, "wb") as f:
        f.write(data)
    print(f"wrote {path} ({len(data)} bytes)")


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    x = make_rows()
    rows = x.shape[0]
    lib = load_ggml()
    print("llama.cpp (ggml via llama-cpp-python):", "found" if lib else "NOT found: falling back to gguf / iq4nl_ref")
    out = {}
    for name, qt in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("q5_0", T.Q5_0), ("q5_1", T.Q5_1)):
        with np.errstate(all="ignore"):
            g = gguf.quants.quantize(x, qt)
        if lib:
            l = ggml_quantize(lib, qt, x)
            bad = np.nonzero(np.any(l != g, axis=1))[0]
            # the gguf package takes min / the largest magnitude with numpy, which may pick -0 where
            # ggml's loops keep the first of +0 / -0: only rows of zeros may differ
            why = [int(r) for r in bad if np.any(x[r] != 0) and not only_zero_sign(x[r], l[r], g[r], name)]
            print(f"{name}: llama.cpp vs gguf package: {len(bad)} of {rows} rows differ"
                  f"{' (the sign of a zero d or m)' if len(bad) and not why else ''}")
            if why:
                sys.exit(f"{name}: llama.cpp and the gguf package disagree on rows {why[:8]}")
            g = l
        out[name] = g
    r = iq4nl_ref(x)
    row_fn = load_iq4nl_row()
    print("iq4_nl cache writer:", row_fn[0] if row_fn else "NOT found: iq4nl_ref alone")
    if row_fn:
        l = ggml_iq4nl_rows(row_fn[1], x)
        # ggml leaves the indices of an amax < 1e-15 block (d = 0) as the block before left them
        # (stack memory for a row's first block); those 16 bytes decode to 0 whatever they are
        lb, rb = l.reshape(-1, 18).copy(), r.reshape(-1, 18)
        tiny = np.max(np.abs(x.reshape(-1, 32)), axis=1) < f32(1e-15)
        lb[tiny, 2:] = rb[tiny, 2:]
        bad = np.nonzero(np.any(lb != rb, axis=1))[0]
        print(f"iq4_nl: llama.cpp's cache writer vs iq4nl_ref: {len(bad)} of {len(rb)} blocks differ "
              f"({int(np.sum(tiny))} blocks with amax < 1e-15: d compared, indices not)")
        if len(bad):
            print("blocks", bad[:10], lb[bad[0]].tolist(), rb[bad[0]].tolist())
            sys.exit("iq4_nl: llama.cpp and iq4nl_ref disagree")
    out["iq4_nl"] = r
    out["e5m2"] = spec_e5m2(x)
    out["e4m3s"] = spec_scaled(x, E4M3, 448.0)
    out["e5m2s"] = spec_scaled(x, E5M2, 57344.0)
    out["nvfp4"] = spec_nvfp4(x)
    out["mxfp4"] = spec_mxfp4(x)
    # mxfp4 vs the ggml-convention quantisers (gguf package; llama.cpp when present)
    others = [("gguf package", gguf.quants.quantize(x, T.MXFP4))]
    if lib:
        try:
            others.append(("llama.cpp", ggml_quantize(lib, T.MXFP4, x)))
        except Exception as ex:   # an older ggml without MXFP4
            print("llama.cpp MXFP4:", ex)
    ours = out["mxfp4"].reshape(-1, 17)
    xb = x.reshape(-1, 32)
    for who, t in others:
        t = t.reshape(-1, 17)
        diff = np.nonzero(np.any(t != ours, axis=1))[0]
        whys = [explain_mxfp4_diff(xb[i], ours[i], t[i]) for i in diff]
        unexplained = [int(i) for i, w in zip(diff, whys) if w is None]
        counts = ", ".join(f"{k} {whys.count(k)}" for k in ("tie", "zero", "log2f", "wrap"))
        print(f"mxfp4 vs {who}: {len(diff)} of {len(ours)} blocks differ ({counts}; "
              f"unexplained: {len(unexplained)})")
        for i in unexplained[:4]:
            print("  block", i, "x =", xb[i].tolist(), "\n  ours", ours[i].tolist(), "\n  theirs", t[i].tolist())
        if unexplained:
            sys.exit("mxfp4: unexplained difference")
    with np.errstate(all="ignore"):
        gd = gguf.quants.dequantize(out["mxfp4"], T.MXFP4)
    sd = decode_rows("mxfp4", out["mxfp4"], H)
    if not np.array_equal(gd, sd):
        sys.exit("mxfp4: the spec decoding and gguf.quants.dequantize disagree")
    qt = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1}

    def out_ggml(y, base):
        with np.errstate(all="ignore"):
            g = gguf.quants.quantize(y, qt[base])
        if lib:
            l = ggml_quantize(lib, qt[base], y)
            if not np.array_equal(l, g):
                print(f"{base} (rotated rows): llama.cpp vs gguf package differ on "
                      f"{int(np.sum(np.any(l != g, axis=1)))} rows; using llama.cpp's")
            g = l
        return g
    for name, (q, y, n) in kivi_fixtures(x).items():
        write(f"{name}.bin", H, b"SKVQ" + struct.pack("<III", H, n, q.shape[1]) + q.astype(np.uint8).tobytes() +
              y.astype("<f4").tobytes())
    xr, rot = rotated_fixtures(x, out_ggml)
    write("input.bin", H, b"SKVI" + struct.pack("<II", H, rows) + x.astype("<f4").tobytes())
    nr = xr.shape[0]
    write("rot-input.bin", ROT_H, b"SKVI" + struct.pack("<II", ROT_H, nr) + xr.astype("<f4").tobytes())
    x3, rotp = rotp_fixtures(xr, out_ggml)
    write("rotp-input.bin", ROTP_H, b"SKVI" + struct.pack("<II", ROTP_H, x3.shape[0]) + x3.astype("<f4").tobytes())
    for name, (base, q) in rotp.items():
        q = np.ascontiguousarray(q, dtype=np.uint8).reshape(x3.shape[0], -1)
        write(f"{name}.bin", ROTP_H, b"SKVQ" + struct.pack("<III", ROTP_H, x3.shape[0], q.shape[1]) + q.tobytes() +
              decode_rows(base, q, ROTP_H).astype("<f4").tobytes())
    for name, (base, q) in rot.items():
        if base == "tq":
            q, y = q
        q = np.ascontiguousarray(q, dtype=np.uint8).reshape(nr, -1)
        if base != "tq":
            y = decode_rows(base, q, ROT_H)
        write(f"{name}.bin", ROT_H, b"SKVQ" + struct.pack("<III", ROT_H, nr, q.shape[1]) + q.tobytes() +
              y.astype("<f4").tobytes())
    for name, q in out.items():
        q = np.ascontiguousarray(q, dtype=np.uint8).reshape(rows, -1)
        y = decode_rows(name, q, H)
        write(f"{name}.bin", H, b"SKVQ" + struct.pack("<III", H, rows, q.shape[1]) + q.tobytes() +
              y.astype("<f4").tobytes())


if __name__ == "__main__":
    main()
