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

# Byte offsets of the fp16 fields inside one block, per type (see the layouts in worker/quant.c).
FP16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
QUANTISABLE = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
K_QUANTS = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]


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


def write_fixture(qtype):
    rng = np.random.default_rng(1000 + int(qtype))          # one fixed seed per type
    if qtype in QUANTISABLE:
        q = np.concatenate([quantised_rows(rng, qtype, 2), random_rows(rng, qtype, 2)], axis=0)
    else:
        q = random_rows(rng, qtype, ROWS)
    q = np.ascontiguousarray(q, dtype=np.uint8)
    block_values, block_bytes = GGML_QUANT_SIZES[qtype]
    assert q.shape == (ROWS, COLS // block_values * block_bytes)

    ref = np.ascontiguousarray(gguf.quants.dequantize(q, qtype), dtype=np.float32)
    assert ref.shape == (ROWS, COLS)

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
    for qtype in QUANTISABLE + K_QUANTS:
        path = write_fixture(qtype)
        size = os.path.getsize(path)
        total += size
        print(f"{os.path.relpath(path)}: {size} bytes")
    print(f"total {total} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
