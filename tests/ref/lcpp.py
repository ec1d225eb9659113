"""lcpp.py: a thin wrapper over llama-cpp-python's low-level C API, used by the
reference scripts (make_logit_fixtures.py, make_tok_fixtures.py) and the
benchmark (tests/bench/llamacpp_bench.py).

Only the C API is used (not the high-level Llama class) so that every context
parameter that changes the numbers is set explicitly: KV cache types, flash
attention, n_batch / n_ubatch, threads.

    m = Model(path)                     # load (CPU only, mmap)
    ids = m.tokenize(text, add_bos, special)
    ctx = m.context(n_ctx, type_k=F32, type_v=F32, flash_attn=FA_OFF,
                    n_threads=2, n_batch=512, n_ubatch=512)
    rows = ctx.decode(ids, pos0=0, want_logits=True)   # [n][n_vocab] float32
    ctx.clear(); ctx.close(); m.close()
"""
import ctypes
import os

import numpy as np
import llama_cpp as L

# ggml_type values (ggml.h)
F32, F16, Q8_0, Q4_0 = 0, 1, 8, 2
TYPE_NAMES = {F32: "f32", F16: "f16", Q8_0: "q8_0", Q4_0: "q4_0"}
# llama_flash_attn_type values (llama.h)
FA_AUTO, FA_OFF, FA_ON = -1, 0, 1
FA_NAMES = {FA_AUTO: "auto", FA_OFF: "off", FA_ON: "on"}

_log_cb = None


def quiet():
    """Silence llama.cpp's logging (it writes to stderr by default)."""
    global _log_cb
    if _log_cb is None:
        @L.llama_log_callback
        def _cb(level, text, user_data):
            return None
        _log_cb = _cb
        L.llama_log_set(_log_cb, ctypes.c_void_p(0))


def engine_version():
    return f"llama-cpp-python {L.__version__}"


def system_info():
    return L.llama_print_system_info().decode("utf-8", "replace").strip()


class Context:
    def __init__(self, model, n_ctx, type_k, type_v, flash_attn, n_threads, n_batch, n_ubatch):
        p = L.llama_context_default_params()
        p.n_ctx = n_ctx
        p.n_batch = n_batch
        p.n_ubatch = n_ubatch
        p.n_seq_max = 1
        p.n_threads = n_threads
        p.n_threads_batch = n_threads
        p.flash_attn_type = flash_attn
        p.type_k = type_k
        p.type_v = type_v
        p.no_perf = True
        p.swa_full = True
        self.model = model
        self.n_vocab = model.n_vocab
        self.n_batch = n_batch
        self.ctx = L.llama_init_from_model(model.model, p)
        if not self.ctx:
            raise RuntimeError(f"llama_init_from_model failed (n_ctx {n_ctx}, type_k {type_k}, "
                               f"type_v {type_v}, flash_attn {flash_attn})")
        self.batch = L.llama_batch_init(n_batch, 0, 1)

    def clear(self):
        L.llama_memory_clear(L.llama_get_memory(self.ctx), True)

    def truncate(self, n_keep):
        """Drop every cached position >= n_keep."""
        if not L.llama_memory_seq_rm(L.llama_get_memory(self.ctx), 0, n_keep, -1):
            raise RuntimeError("llama_memory_seq_rm failed")

    def decode(self, tokens, pos0, want_logits):
        """Decode tokens at positions pos0.. in chunks of n_batch.

        want_logits: True -> returns float32 [len(tokens)][n_vocab] (every row);
                     "last" -> returns float32 [n_vocab] of the last token;
                     False -> returns None.
        """
        n = len(tokens)
        out = np.empty((n, self.n_vocab), np.float32) if want_logits is True else None
        last = None
        for s in range(0, n, self.n_batch):
            chunk = tokens[s:s + self.n_batch]
            b = self.batch
            b.n_tokens = len(chunk)
            for j, t in enumerate(chunk):
                b.token[j] = int(t)
                b.pos[j] = pos0 + s + j
                b.n_seq_id[j] = 1
                b.seq_id[j][0] = 0
                is_last = (s + j == n - 1)
                b.logits[j] = 1 if (want_logits is True or (want_logits == "last" and is_last)) else 0
            rc = L.llama_decode(self.ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode returned {rc}")
            if want_logits is True:
                for j in range(len(chunk)):
                    ptr = L.llama_get_logits_ith(self.ctx, j)
                    out[s + j] = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))
            elif want_logits == "last" and s + len(chunk) == n:
                ptr = L.llama_get_logits_ith(self.ctx, len(chunk) - 1)
                last = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
        L.llama_synchronize(self.ctx)
        return out if want_logits is True else last

    def close(self):
        if self.batch is not None:
            L.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx:
            L.llama_free(self.ctx)
            self.ctx = None


class Model:
    def __init__(self, path):
        if not os.path.isfile(path):
            raise FileNotFoundError(path)
        L.llama_backend_init()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = 0
        mp.use_mmap = True
        self.path = path
        self.model = L.llama_model_load_from_file(path.encode(), mp)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {path}")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.vocab))

    def tokenize(self, text, add_bos, special):
        data = text.encode("utf-8") if isinstance(text, str) else text
        cap = len(data) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, add_bos, special)
        if n < 0:
            cap = -n
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(self.vocab, data, len(data), buf, cap, add_bos, special)
        if n < 0:
            raise RuntimeError("llama_tokenize failed")
        return [int(buf[i]) for i in range(n)]

    def context(self, n_ctx, type_k=F32, type_v=F32, flash_attn=FA_OFF, n_threads=2,
                n_batch=512, n_ubatch=512):
        return Context(self, n_ctx, type_k, type_v, flash_attn, n_threads, n_batch, n_ubatch)

    def close(self):
        if self.model:
            L.llama_model_free(self.model)
            self.model = None
