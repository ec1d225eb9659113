#!/usr/bin/env python3
"""make_quant_fixtures.py - reference data for tests/test_quant.c, from the `gguf` package (PyPI).

For each weight type strata dequantises, writes tests/fixtures/quant/TYPE.gguf holding
  q    the quantised data: ROWS x COLS values stored raw in TYPE
  ref  F32 [ROWS x COLS]: the gguf package's own dequantisation of q (gguf.quants.dequantize)
so tests/test_quant.c can check our dequantisers against an implementation no one here wrote,
without needing Python. Each file also carries "strata.fixture.type" (the type's name) and
"strata.fixture.gguf_py" (the gguf package version that made it).

Contents per type (ROWS = 4, COLS = 256, fixed seeds: the output is the same on every run):
  - types the package can quantise (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): rows 0-1 are
    gguf.quants.quantize() of random normal data (row 1 spans many magnitudes and has an all-zero
    block), rows 2-3 are random bytes;
  - K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; the package only dequantises them): all rows random
    bytes.
The IQ, MXFP4 and ternary types (IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S,
IQ1_M, MXFP4, TQ1_0, TQ2_0) have more rows (COLS = 256 still), in this order:
  - MXFP4, TQ1_0, TQ2_0 (the package quantises them): 2 rows quantised as above;
  - coverage blocks: random bytes whose index fields are then set to walk every codebook entry
    (iq1s 2048, iq2s 1024, iq2xs / iq3s 512, iq2xxs / iq3xxs 256), every sign pattern (the 128
    ksigns indices, or all 256 sign bytes where a type stores signs raw), every value of every
    sub-scale field (IQ4_XS: all 64 6-bit scales) and every IQ1 delta sign; MXFP4: every E8M0
    exponent 0..255 (2^-128 .. 2^127: subnormal scales, and products that overflow to inf);
    TQ1_0: every byte value in each of qs[0..31], qs[32..47], qh (so in every trit position);
  - edge blocks: random bytes with the fp16 super-scale set to +0, -0, +-65504, +-2^-24 (smallest
    subnormal), 2^-14 - 2^-24 (largest subnormal), 2^-14 and 1;
  - 8 random blocks (fp16 fields finite, as above), and random ones to fill the last row.
Every row is checked by the test, so each file pins down every table entry the type reads.
Random bytes are valid blocks for dequantisation. Their fp16 fields (scales, minimums, F16 values)
are made finite (no inf/NaN: our reference and the package would agree on those too, but a NaN's
payload is not something to pin down); half of the scale fields hold typical small scales, half
random finite fp16 bits (subnormals and large values included). F16 rows also get +-0, +-inf,
subnormals and +-65504 on purpose; BF16 random bits are used as they are (NaN included: BF16
dequantisation is a bit shift on both sides).

Rerun (from the repository root):
    python3 -m venv tests/.venv && tests/.venv/bin/pip install gguf numpy
    tests/.venv/bin/python tests/ref/make_quant_fixtures.py
Made with gguf 0.19.0 and numpy 2.4; rerunning with those versions gives identical files.
"""
import importlib.metadata
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES

ROWS, COLS = 4, 256
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "quant")

# Byte offsets of the fp16 fields inside one block, per type (see the layouts in kernels/quant.c).
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTISABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
K_QUANTS = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]

# The IQ / MXFP4 / ternary types. FP16_FIELDS holds their fp16 super-scale (IQ1_M has none: its d
# is spread over the top nibbles of its four scale words, see iq1_m_set_d; MXFP4 has a byte E8M0).
IQ_TYPES = [T.IQ4_NL, T.IQ4_XS, T.IQ3_S, T.IQ3_XXS, T.IQ2_XXS, T.IQ2_XS, T.IQ2_S, T.IQ1_S, T.IQ1_M,
            T.MXFP4, T.TQ1_0, T.TQ2_0]
IQ_QUANTISABLE = [T.MXFP4, T.TQ1_0, T.TQ2_0]
FP16_FIELDS.update({
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.IQ3_S: [0], T.IQ3_XXS: [0], T.IQ2_XXS: [0], T.IQ2_XS: [0],
    T.IQ2_S: [0], T.IQ1_S: [0], T.IQ1_M: [], T.MXFP4: [], T.TQ1_0: [52], T.TQ2_0: [64],
})
# +0, -0, 65504, -65504, 2^-24, -2^-24, largest subnormal, smallest normal, 1.0
EDGE_F16 = [0x0000, 0x8000, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00]
N_RANDOM_BLOCKS = 8


def finite_f16_bits(rng, n):
    """n random fp16 bit patterns: half typical scales (|x| ~ 1e-4..1e-1), half any finite value."""
    typical = (rng.standard_normal(n) * 10.0 ** rng.uniform(-4, -1, n)).astype(np.float16)
    anybits = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    anybits = np.where((anybits & 0x7C00) == 0x7C00, anybits & 0xBFFF, anybits)  # exp 31 -> 15
    pick = rng.integers(0, 2, n).astype(bool)
    return np.where(pick, typical.view(np.uint16), anybits).astype(np.uint16)


def random_rows(rng, qtype, rows):
    """rows x COLS values of random raw data in qtype, as uint8 [rows][row bytes]."""
    block_values, block_bytes = GGML_QUANT_SIZES[qtype]
    nblocks = rows * COLS // block_values
    if qtype == T.F32:
        vals = (rng.standard_normal(rows * COLS) * 10.0 ** rng.uniform(-30, 30, rows * COLS))
        return vals.astype(np.float32).view(np.uint8).reshape(rows, -1)
    if qtype == T.F16:
        h = finite_f16_bits(rng, rows * COLS)
        specials = [0x0000, 0x8000, 0x7C00, 0xFC00, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF]
        h[: len(specials)] = specials
        return h.view(np.uint8).reshape(rows, -1)
    if qtype == T.BF16:
        return rng.integers(0, 256, rows * COLS * 2, dtype=np.uint8).reshape(rows, -1)
    blocks = rng.integers(0, 256, (nblocks, block_bytes), dtype=np.uint8)
    for off in FP16_FIELDS[qtype]:
        blocks[:, off:off + 2] = finite_f16_bits(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
    return blocks.reshape(rows, -1)


def quantised_rows(rng, qtype, rows):
    """rows x COLS values of normal data quantised by the gguf package, as uint8 [rows][bytes]."""
    x = rng.standard_normal((rows, COLS)).astype(np.float32)
    x[1] *= (10.0 ** rng.uniform(-6, 3, COLS)).astype(np.float32)   # many magnitudes
    x[1, :32] = 0.0                                                  # an all-zero block
    if qtype == T.F32:
        return x.view(np.uint8)
    if qtype == T.F16:
        return x.astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(gguf.quants.quantize(x, qtype)).view(np.uint8).reshape(rows, -1)


def put_u16(blocks, off, vals):
    blocks[:, off:off + 2] = np.asarray(vals, dtype=np.uint16).reshape(-1, 1).view(np.uint8).reshape(-1, 2)


def put_u32(blocks, off, vals):
    blocks[:, off:off + 4] = np.asarray(vals, dtype=np.uint32).reshape(-1, 1).view(np.uint8).reshape(-1, 4)


def iq1_m_set_d(blocks, h):
    """IQ1_M: the fp16 super-scale is the top nibble of each of the 4 uint16 scale words (48..55)."""
    sc = blocks[:, 48:56].copy().view(np.uint16)                      # [n][4]
    h = np.asarray(h, dtype=np.uint16)
    for w in range(4):
        sc[:, w] = (sc[:, w] & 0x0FFF) | (((h >> (4 * w)) & 0xF) << 12)
    blocks[:, 48:56] = sc.view(np.uint8)


def cover(qtype, blocks):
    """Sets the index / sign / scale fields of blocks [n][bytes] so that consecutive runs walk every
    codebook entry, sign pattern and sub-scale value (each walk wraps around)."""
    n = blocks.shape[0]
    run = np.arange(n * 32, dtype=np.uint32).reshape(n, 32)           # 32 runs of 8 per block
    grp = np.arange(n * 8, dtype=np.uint32).reshape(n, 8)             # 8 groups of 32 per block
    if qtype == T.IQ2_XXS:
        for g in range(8):
            r = run[:, 4 * g:4 * g + 4]
            a0 = (r[:, 0] & 255) | (r[:, 1] & 255) << 8 | (r[:, 2] & 255) << 16 | (r[:, 3] & 255) << 24
            a1 = (r[:, 0] % 128) | (r[:, 1] % 128) << 7 | (r[:, 2] % 128) << 14 | (r[:, 3] % 128) << 21
            a1 |= (grp[:, g] % 16) << 28
            put_u32(blocks, 2 + 8 * g, a0)
            put_u32(blocks, 6 + 8 * g, a1)
    elif qtype == T.IQ2_XS:
        for k in range(32):
            put_u16(blocks, 2 + 2 * k, (run[:, k] % 512) | ((run[:, k] * 5) % 128) << 9)
        sc = np.arange(n * 16, dtype=np.uint32).reshape(n, 8, 2) % 16
        blocks[:, 66:74] = (sc[..., 0] | sc[..., 1] << 4).astype(np.uint8)
    elif qtype == T.IQ2_S:
        idx = run % 1024
        blocks[:, 2:34] = (idx & 255).astype(np.uint8)
        blocks[:, 34:66] = ((run * 7) % 256).astype(np.uint8)
        hi = (idx >> 8).reshape(n, 8, 4)
        blocks[:, 66:74] = (hi[..., 0] | hi[..., 1] << 2 | hi[..., 2] << 4 | hi[..., 3] << 6).astype(np.uint8)
        sc = np.arange(n * 16, dtype=np.uint32).reshape(n, 8, 2) % 16
        blocks[:, 74:82] = (sc[..., 0] | sc[..., 1] << 4).astype(np.uint8)
    elif qtype == T.IQ3_XXS:
        blocks[:, 2:66] = (np.arange(n * 64).reshape(n, 64) % 256).astype(np.uint8)
        for g in range(8):
            r = run[:, 4 * g:4 * g + 4]
            a = (r[:, 0] % 128) | (r[:, 1] % 128) << 7 | (r[:, 2] % 128) << 14 | (r[:, 3] % 128) << 21
            put_u32(blocks, 66 + 4 * g, a | (grp[:, g] % 16) << 28)
    elif qtype == T.IQ3_S:
        idx = np.arange(n * 64, dtype=np.uint32).reshape(n, 64) % 512
        blocks[:, 2:66] = (idx & 255).astype(np.uint8)
        hi = (idx >> 8).reshape(n, 8, 8)
        blocks[:, 66:74] = sum(hi[..., b] << b for b in range(8)).astype(np.uint8)
        blocks[:, 74:106] = ((run * 3) % 256).astype(np.uint8)
        sc = np.arange(n * 8, dtype=np.uint32).reshape(n, 4, 2) % 16
        blocks[:, 106:110] = (sc[..., 0] | sc[..., 1] << 4).astype(np.uint8)
    elif qtype == T.IQ1_S:
        idx = run % 2048
        blocks[:, 2:34] = (idx & 255).astype(np.uint8)
        for g in range(8):
            hi = idx[:, 4 * g:4 * g + 4] >> 8
            h = hi[:, 0] | hi[:, 1] << 3 | hi[:, 2] << 6 | hi[:, 3] << 9
            h |= (grp[:, g] % 8) << 12 | ((grp[:, g] // 8) % 2) << 15
            put_u16(blocks, 34 + 2 * g, h)
    elif qtype == T.IQ1_M:
        idx = run % 2048
        blocks[:, 0:32] = (idx & 255).astype(np.uint8)
        nib = (idx >> 8) | ((run // 3) % 2) << 3                         # delta sign bit 3
        nib = nib.reshape(n, 16, 2)
        blocks[:, 32:48] = (nib[..., 0] | nib[..., 1] << 4).astype(np.uint8)
        s = (np.arange(n * 16, dtype=np.uint32).reshape(n, 4, 4) % 8)
        words = s[..., 0] | s[..., 1] << 3 | s[..., 2] << 6 | s[..., 3] << 9    # top nibble: d
        keep = blocks[:, 48:56].copy().view(np.uint16) & 0xF000
        blocks[:, 48:56] = (keep | words).astype(np.uint16).view(np.uint8)
    elif qtype == T.IQ4_XS:
        sc = np.arange(n * 8, dtype=np.uint32).reshape(n, 8) % 64
        put_u16(blocks, 2, sum((sc[:, g] >> 4) << (2 * g) for g in range(8)))
        lo = (sc & 15).reshape(n, 4, 2)
        blocks[:, 4:8] = (lo[..., 0] | lo[..., 1] << 4).astype(np.uint8)
    elif qtype == T.TQ1_0:
        blocks[:, 0:52] = ((np.arange(n).reshape(n, 1) * 4 + np.arange(52)) % 256).astype(np.uint8)
    elif qtype in (T.IQ4_NL, T.MXFP4, T.TQ2_0):
        pass                                  # random bytes cover every code; MXFP4's e: below
    else:
        raise ValueError(qtype)


# coverage blocks per type: enough runs for the largest walk (codebook, signs, sub-scales)
N_COVER = {T.IQ2_XXS: 8, T.IQ2_XS: 16, T.IQ2_S: 32, T.IQ3_XXS: 8, T.IQ3_S: 8, T.IQ1_S: 64,
           T.IQ1_M: 64, T.IQ4_XS: 8, T.TQ1_0: 64, T.IQ4_NL: 8, T.TQ2_0: 8, T.MXFP4: 256}


def iq_fixture_rows(rng, qtype):
    """Rows of COLS values for an IQ / MXFP4 / ternary type (see the header), as uint8 [rows][bytes]."""
    block_values, block_bytes = GGML_QUANT_SIZES[qtype]
    per_row = COLS // block_values
    parts = []
    if qtype in IQ_QUANTISABLE:
        parts.append(quantised_rows(rng, qtype, 2).reshape(-1, block_bytes))
    n_cov = N_COVER[qtype]
    cov = rng.integers(0, 256, (n_cov, block_bytes), dtype=np.uint8)
    edge = rng.integers(0, 256, (len(EDGE_F16), block_bytes), dtype=np.uint8)
    rand = rng.integers(0, 256, (N_RANDOM_BLOCKS, block_bytes), dtype=np.uint8)
    for blocks in (cov, rand):                                         # finite fp16 scales
        for off in FP16_FIELDS[qtype]:
            put_u16(blocks, off, finite_f16_bits(rng, blocks.shape[0]))
        if qtype == T.IQ1_M:
            iq1_m_set_d(blocks, finite_f16_bits(rng, blocks.shape[0]))
    cover(qtype, cov)
    if qtype == T.MXFP4:
        cov[:, 0] = np.arange(256, dtype=np.uint8)                     # every exponent
        edge[:, 0] = [0, 1, 2, 126, 127, 128, 253, 254, 255]
    for off in FP16_FIELDS[qtype]:
        put_u16(edge, off, EDGE_F16)
    if qtype == T.IQ1_M:
        iq1_m_set_d(edge, EDGE_F16)
    parts += [cov, edge, rand]
    blocks = np.concatenate(parts, axis=0)
    pad = (-blocks.shape[0]) % per_row                                 # whole rows: pad randomly
    if pad:
        extra = rng.integers(0, 256, (pad, block_bytes), dtype=np.uint8)
        for off in FP16_FIELDS[qtype]:
            put_u16(extra, off, finite_f16_bits(rng, pad))
        blocks = np.concatenate([blocks, extra], axis=0)
    return blocks.reshape(-1, per_row * block_bytes)


def write_fixture(qtype):
    rng = np.random.default_rng(1000 + int(qtype))          # one fixed seed per type
    block_values, block_bytes = GGML_QUANT_SIZES[qtype]
    if qtype in IQ_TYPES:
        q = iq_fixture_rows(rng, qtype)
    elif qtype in QUANTISABLE:
        q = np.concatenate([quantised_rows(rng, qtype, 2), random_rows(rng, qtype, 2)], axis=0)
    else:
        q = random_rows(rng, qtype, ROWS)
    q = np.ascontiguousarray(q, dtype=np.uint8)
    rows = q.shape[0]
    assert q.shape == (rows, COLS // block_values * block_bytes)
    assert rows == ROWS or qtype in IQ_TYPES

    ref = np.ascontiguousarray(gguf.quants.dequantize(q, qtype), dtype=np.float32)
    assert ref.shape == (rows, COLS)

    path = os.path.join(OUT_DIR, qtype.name + ".gguf")
    w = gguf.GGUFWriter(path, arch="strata-fixture")
    w.add_string("strata.fixture.type", qtype.name)
    w.add_string("strata.fixture.gguf_py", importlib.metadata.version("gguf"))
    if qtype == T.F32:
        w.add_tensor("q", q.view(np.float32))
    elif qtype == T.F16:
        w.add_tensor("q", q.view(np.float16))
    else:
        w.add_tensor("q", q, raw_dtype=qtype)
    w.add_tensor("ref", ref)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    total = 0
    for qtype in QUANTISABLE + K_QUANTS + IQ_TYPES:
        path = write_fixture(qtype)
        size = os.path.getsize(path)
        total += size
        print(f"{os.path.relpath(path)}: {size} bytes")
    print(f"total {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
