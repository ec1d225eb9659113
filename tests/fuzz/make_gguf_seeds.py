#!/usr/bin/env python3
"""make_gguf_seeds.py: the GGUF fuzzer's seed corpus (tests/fuzz/corpus/gguf/).

Usage: python tests/fuzz/make_gguf_seeds.py   (needs the PyPI packages gguf and numpy)

Writes, deterministically:
  tiny-{llama,qwen2,qwen3,gemma3}.gguf  the architectures of tests/ref/make_gguf.py shrunk to
                                        dim 8, one layer (gemma3: two), head dim 4, ff 16, with
                                        the same tokenizers (SPM from stories260K, BPE cut from
                                        GPT-2): valid models that load
  vocab-only.gguf                        the llama tokenizer with no tensors and no architecture
                                        keys (tokenizer loads, model load refuses)
  trunc-*.gguf                           tiny-llama cut inside its header, its metadata and its
                                        tensor data
  huge-*.gguf                            tiny-llama with one count patched: n_tensors 2^40,
                                        n_kv 2^40, block_count 60,000,000, a string length 2^62
  dup-key.gguf, bad-align.gguf           a duplicate metadata key; general.alignment 3
The whole corpus stays well under 1 MB."""
import os
import struct
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import make_gguf  # noqa: E402  (the fixture models' writer)

OUT = os.path.join(HERE, "corpus", "gguf")

for arch, c in make_gguf.ARCHS.items():
    c.update(dim=8, n_layer=2 if arch == "gemma3" else 1, n_head=2, n_head_kv=1, head_dim=4, n_ff=16,
             sliding_window=4)
make_gguf.MODELS = {f"tiny-{a}": (a, {}) for a in ("llama", "qwen2", "qwen3", "gemma3")}


def write_vocab_only(path):
    w = gguf.GGUFWriter(path, "llama")
    make_gguf.add_tokenizer(w, make_gguf.spm_vocab(), add_bos=True)
    # a vocabulary-only file as llama.cpp ships them: no tensors, no hyperparameters
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def patched(src, dst, fn):
    b = bytearray(open(src, "rb").read())
    fn(b)
    open(dst, "wb").write(bytes(b))


def key_offset(b, key):
    """Offset of the length prefix of metadata key `key` in a GGUF v3 file."""
    k = key.encode()
    i = bytes(b).index(struct.pack("<Q", len(k)) + k)
    return i


def main():
    os.makedirs(OUT, exist_ok=True)
    for name in make_gguf.MODELS:
        make_gguf.build(name, os.path.join(OUT, f"{name}.gguf"))
    write_vocab_only(os.path.join(OUT, "vocab-only.gguf"))
    base = os.path.join(OUT, "tiny-llama.gguf")
    data = open(base, "rb").read()
    for name, n in (("header", 20), ("meta", 3000), ("tensors", len(data) - 100)):
        open(os.path.join(OUT, f"trunc-{name}.gguf"), "wb").write(data[:n])

    def set_u64(off, v):
        return lambda b: b.__setitem__(slice(off, off + 8), struct.pack("<Q", v))
    patched(base, os.path.join(OUT, "huge-n-tensors.gguf"), set_u64(8, 1 << 40))
    patched(base, os.path.join(OUT, "huge-n-kv.gguf"), set_u64(16, 1 << 40))
    off = key_offset(data, "llama.block_count")
    vo = off + 8 + len("llama.block_count") + 4           # after key and value type (uint32)
    patched(base, os.path.join(OUT, "huge-block-count.gguf"),
            lambda b: b.__setitem__(slice(vo, vo + 4), struct.pack("<I", 60000000)))
    off = key_offset(data, "general.name")
    so = off + 8 + len("general.name") + 4                # the string value's length
    patched(base, os.path.join(OUT, "huge-string.gguf"), set_u64(so, 1 << 62))

    def dup(b):   # "llama.block_count" renamed to "general.file_type" (same length): a duplicate key
        i = key_offset(b, "llama.block_count") + 8
        b[i:i + 17] = b"general.file_type"
    patched(base, os.path.join(OUT, "dup-key.gguf"), dup)
    w = gguf.GGUFWriter(os.path.join(OUT, "bad-align.gguf"), "llama")
    w.add_uint32("general.alignment", 3)
    w.add_tensor("x", np.arange(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{OUT}: {len(os.listdir(OUT))} files, {total} bytes")
    if total > 700 * 1024:
        raise SystemExit("make_gguf_seeds.py: the corpus is over 700 KB")


if __name__ == "__main__":
    main()
