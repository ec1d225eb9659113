#!/usr/bin/env python3
"""make_weight_arm_fixture.py - two re-quantisations of stories260K for the weight-arm tests
(strata-driver sweep --arm-model, tests/armmodel.test.sh), made with the `gguf` package (PyPI).

Reads tests/fixtures/models/stories260K.gguf (F32, SentencePiece vocabulary of 512) and writes
  tests/fixtures/models/stories260K-q8_0.gguf
      the same model, every metadata key copied unchanged (so the same tokenizer), every 2-D weight
      whose row length is a multiple of 32 quantised to Q8_0 by gguf.quants.quantize (ggml's
      reference Q8_0: per block of 32, d = max|x| / 127 as f16, q = round(x / d)); the rest (the
      norms, and ffn_down, whose rows are 172 long) stay F32. Different weights, same tokenizer.
  tests/fixtures/models/stories260K-q8_0-othertok.gguf
      the same as the above except that token 300's score is negated: same n_vocab and BOS, but
      another tokenizer (its tokenizer_hash differs), for the refusal test.
Tensor order, names and shapes are those of the input; the data alignment is gguf's default (32).
Each file also records "strata.fixture.source" (the input's name) and "strata.fixture.gguf_py".

Rerun (from the repository root):
    python3 -m venv tests/.venv && tests/.venv/bin/pip install gguf numpy
    tests/.venv/bin/python tests/ref/make_weight_arm_fixture.py
Made with gguf 0.19.0 and numpy 2.4; rerunning with those versions gives identical files.
"""
import importlib.metadata
import os
import sys

import numpy as np
import gguf

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SRC = os.path.join(ROOT, "tests", "fixtures", "models", "stories260K.gguf")
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "models")
PATCHED_TOKEN = 300


def field_value(f):
    """A reader field's value and its type(s), ready for GGUFWriter.add_key_value."""
    vt = f.types[0]
    if vt == gguf.GGUFValueType.ARRAY:
        return f.contents(), vt, f.types[1]
    return f.contents(), vt, None


def write(path, reader, patch_tokenizer):
    arch = reader.get_field("general.architecture").contents()
    w = gguf.GGUFWriter(path, arch)
    for f in reader.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        val, vt, sub = field_value(f)
        if patch_tokenizer and f.name == "tokenizer.ggml.scores":
            val = list(val)
            val[PATCHED_TOKEN] = -val[PATCHED_TOKEN] if val[PATCHED_TOKEN] != 0 else 1.0
        w.add_key_value(f.name, val, vt, sub_type=sub)
    w.add_string("strata.fixture.source", os.path.basename(SRC))
    w.add_string("strata.fixture.gguf_py", importlib.metadata.version("gguf"))
    for t in reader.tensors:
        assert t.tensor_type == gguf.GGMLQuantizationType.F32, t.name
        ne = [int(x) for x in t.shape]             # ne[0] = row length (fastest)
        rows = np.asarray(t.data, dtype=np.float32).reshape(list(reversed(ne)))
        if len(ne) == 2 and ne[0] % 32 == 0:
            q = gguf.quants.quantize(rows, gguf.GGMLQuantizationType.Q8_0)
            w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(t.name, rows)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    reader = gguf.GGUFReader(SRC)
    write(os.path.join(OUT_DIR, "stories260K-q8_0.gguf"), reader, False)
    write(os.path.join(OUT_DIR, "stories260K-q8_0-othertok.gguf"), reader, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
