#!/usr/bin/env python3
"""lcpp_kld.py - llama.cpp's `llama-perplexity --kl-divergence`, reproduced with llama-cpp-python
(which does not ship the llama-perplexity tool), and the same quantity from strata's positions.tsv.

What llama.cpp computes (tools/perplexity/perplexity.cpp of the vendored llama.cpp, read, not copied):
  * The text is tokenised once (BOS added if the vocabulary says so) and cut into n_chunk chunks of
    n_ctx tokens (n_chunk = tokens // n_ctx, or --chunks). Each chunk is evaluated from an empty
    cache at positions 0 .. n_ctx-1; when the vocabulary adds BOS, the chunk's first token is
    replaced by BOS (the base run and the KL run alike).
  * Only the second half is scored: the rows at positions first = n_ctx/2 .. n_ctx-2, each against
    the next token (n_ctx - 1 - first rows per chunk).
  * --kl-divergence-base: the base model's rows are stored as log-probabilities quantised to uint16
    per row: min_logit = max(min logit, max logit - 16), scale = (max - min_logit) / 65535,
    code = nearest((logit - min_logit) / scale) (0 for logits at or below min_logit), with the
    row's scale and min log-prob beside it.
  * --kl-divergence: per scored row, with p the base distribution (from the uint16 codes) and q the
    model's:  KLD = sum over tokens with log p > -16 of p (log p - log q)   = KL(base || model);
    nll = -log q(next), nll_base = -log p(next), dp = q(next) - p(next), same top = the two argmaxes
    agree (first index on ties). Sums in double; every per-token term in float32, as llama.cpp.
  * It prints: Mean PPL(Q), PPL(base), their correlation, ln(PPL(Q)/PPL(base)) with its
    uncertainty, Mean KLD +- its standard error (sqrt((E[x^2] - E[x]^2) / (n - 1))), the KLD
    maximum / 99.9 / 99 / 95 / 90 % / median / 10 / 5 / 1 / 0.1 % / minimum (linear interpolation
    between sorted values), Mean dp +- its error, the dp percentiles, RMS dp, Same top p +- its
    binomial error.

This script:
  make-models OUT          OUT/smollm2-f32.gguf (every weight of the real Q4_1 SmolLM2 dequantised
                           to F32 by the gguf package: the same weights) and OUT/smollm2-q8_0.gguf
                           (those values re-quantised to Q8_0, rows of a multiple of 32; the rest
                           F32), metadata copied (same tokenizer). ~0.6 GB; keep OUT in /tmp.
  run --base B --model NAME=Q [--model ...] [--ctx 512] [--chunks 8] [--text FILE]
      [--strata DRIVER --work DIR]
                           llama.cpp's protocol on the text (default: the KJV as strata reads it:
                           `bible -f Gen1:1-Rev22:21`, verse labels stripped): the base model's rows,
                           then each model's, printed as llama.cpp prints them. With --strata, the
                           same chunks through strata (one sweep per chunk: --model B --arms f16
                           --arm-model NAME=Q ... --per-position, token ids given with
                           --tokens-file) and the same statistics from positions.tsv (kl_ref_arm,
                           nll_arm, nll_ref, same_top1 at the scored positions).
  selftest                 the statistics against hand-worked cases (no llama.cpp, no numpy);
                           tests/lcppkld.test.sh runs it.

llama.cpp is run through tests/ref/lcpp.py as llama-perplexity runs it by default: KV cache f16,
flash attention auto, n_batch = n_ubatch = 512 (llama-perplexity's default n_batch 2048 would
evaluate four 512-token chunks side by side, n_seq 4; one chunk per call here), 2 threads.

Rerun (from the repository root; ~10 min on 2 loaded cores):
    tests/.venv/bin/python tests/ref/lcpp_kld.py make-models /tmp/strata-kld
    tests/.venv/bin/python tests/ref/lcpp_kld.py run --base /tmp/strata-kld/smollm2-f32.gguf \\
        --model q4_1=$HOME/.cache/strata/smollm2-135m-instruct-q4_1.gguf \\
        --model q8_0=/tmp/strata-kld/smollm2-q8_0.gguf --strata build/strata-driver --work /tmp/strata-kld
"""
import math
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
KJV_COMMAND = ["bible", "-f", "Gen1:1-Rev22:21"]
# driver/document.c doc_strip_verse_labels: "[1-9]?Letters Digits:Digits " at a line start
VERSE_LABEL = re.compile(r"^[1-9]?[A-Za-z]+[0-9]+:[0-9]+ ", re.M)


# ---- statistics, as perplexity.cpp's kl_divergence() (pure Python: selftest needs no numpy) ----

def mean_and_uncertainty(s, s2, n):
    """(mean, standard error) from a sum and a sum of squares of n values; 0 error for n <= 10."""
    if n < 1:
        return 0.0, 0.0
    f = s / n
    df = s2 / n - f * f
    df = math.sqrt(df / (n - 1)) if df > 0 and n > 10 else 0.0
    return f, df


def covariance(sa, sb, sab, n):
    if n < 10:
        return 0.0
    return (sab / n - (sa / n) * (sb / n)) / (n - 1)


def percentile(sorted_values, fraction):
    """Linear interpolation between sorted values at fraction * (n - 1)."""
    v = sorted_values
    if fraction <= 0:
        return v[0]
    if fraction >= 1:
        return v[-1]
    p = fraction * (len(v) - 1)
    ip = int(p)
    p -= ip
    return (1 - p) * v[ip] + p * v[min(ip + 1, len(v) - 1)]


def median(sorted_values):
    v, n = sorted_values, len(sorted_values)
    return 0.5 * (v[n // 2] + v[n // 2 - 1]) if n % 2 == 0 else v[n // 2]


class Acc:
    """The running sums of one comparison (kl_divergence_result) and the per-row values."""

    def __init__(self):
        self.nll = self.nll2 = self.nll_b = self.nll_b2 = self.nll_nll_b = 0.0
        self.kld = self.kld2 = self.dp = self.dp2 = self.dp4 = 0.0
        self.same = 0
        self.n = 0
        self.klds, self.dps = [], []

    def add(self, kld, nll, nll_base, p_diff, same_top):
        self.nll += nll
        self.nll2 += nll * nll
        self.nll_b += nll_base
        self.nll_b2 += nll_base * nll_base
        self.nll_nll_b += nll * nll_base
        self.kld += kld
        self.kld2 += kld * kld
        self.dp += p_diff
        self.dp2 += p_diff * p_diff
        self.dp4 += p_diff ** 4
        self.same += 1 if same_top else 0
        self.n += 1
        self.klds.append(kld)
        self.dps.append(p_diff)

    def summary(self):
        """The figures llama.cpp prints at the end, as a dict (fractions, not percent)."""
        n = self.n
        lp, lpu = mean_and_uncertainty(self.nll, self.nll2, n)
        lb, lbu = mean_and_uncertainty(self.nll_b, self.nll_b2, n)
        cov = covariance(self.nll, self.nll_b, self.nll_nll_b, n)
        kl, klu = mean_and_uncertainty(self.kld, self.kld2, n)
        dp, dpu = mean_and_uncertainty(self.dp, self.dp2, n)
        mse, mseu = mean_and_uncertainty(self.dp2, self.dp4, n)
        top = self.same / n
        k, d = sorted(self.klds), sorted(self.dps)
        out = {
            "n": n, "ppl_q": math.exp(lp), "ppl_q_unc": math.exp(lp) * lpu,
            "ppl_base": math.exp(lb), "ppl_base_unc": math.exp(lb) * lbu,
            "cor": cov / (lpu * lbu) if lpu * lbu > 0 else 0.0,
            "ln_ratio": lp - lb, "ln_ratio_unc": math.sqrt(max(0.0, lpu * lpu + lbu * lbu - 2 * cov)),
            "kld": kl, "kld_unc": klu, "kld_max": k[-1], "kld_median": median(k), "kld_min": k[0],
            "dp": dp, "dp_unc": dpu, "dp_max": d[-1], "dp_median": median(d), "dp_min": d[0],
            "dp_rms": math.sqrt(mse), "dp_rms_unc": 0.5 / math.sqrt(mse) * mseu if mse > 0 else 0.0,
            "same_top": top, "same_top_unc": math.sqrt(top * (1 - top) / (n - 1)) if n > 1 else 0.0,
        }
        for f in (0.999, 0.99, 0.95, 0.90, 0.10, 0.05, 0.01, 0.001):
            out[f"kld_p{f * 100:g}"] = percentile(k, f)
        for f in (0.999, 0.99, 0.95, 0.90, 0.75, 0.25, 0.10, 0.05, 0.01, 0.001):
            out[f"dp_p{f * 100:g}"] = percentile(d, f)
        return out


def print_summary(title, s):
    """llama.cpp's closing block (its labels and formats)."""
    print(f"==== {title}: {s['n']} scored rows")
    print("====== Perplexity statistics ======")
    print(f"Mean PPL(Q)                   : {s['ppl_q']:10.6f} ± {s['ppl_q_unc']:10.6f}")
    print(f"Mean PPL(base)                : {s['ppl_base']:10.6f} ± {s['ppl_base_unc']:10.6f}")
    print(f"Cor(ln(PPL(Q)), ln(PPL(base))): {100 * s['cor']:6.2f}%")
    print(f"Mean ln(PPL(Q)/PPL(base))     : {s['ln_ratio']:10.6f} ± {s['ln_ratio_unc']:10.6f}")
    print("====== KL divergence statistics ======")
    print(f"Mean    KLD: {s['kld']:10.6f} ± {s['kld_unc']:10.6f}")
    print(f"Maximum KLD: {s['kld_max']:10.6f}")
    for f in ("99.9", "99", "95", "90"):
        print(f"{float(f):4.1f}%   KLD: {s['kld_p' + f]:10.6f}")
    print(f"Median  KLD: {s['kld_median']:10.6f}")
    for f in ("10", "5", "1", "0.1"):
        print(f"{float(f):4.1f}%   KLD: {s['kld_p' + f]:10.6f}")
    print(f"Minimum KLD: {s['kld_min']:10.6f}")
    print("====== Token probability statistics ======")
    print(f"Mean    Δp: {100 * s['dp']:6.3f} ± {100 * s['dp_unc']:5.3f} %")
    print(f"Maximum Δp: {100 * s['dp_max']:6.3f}%")
    for f in ("99.9", "99", "95", "90", "75"):
        print(f"{float(f):4.1f}%   Δp: {100 * s['dp_p' + f]:6.3f}%")
    print(f"Median  Δp: {100 * s['dp_median']:6.3f}%")
    for f in ("25", "10", "5", "1", "0.1"):
        print(f"{float(f):4.1f}%   Δp: {100 * s['dp_p' + f]:6.3f}%")
    print(f"Minimum Δp: {100 * s['dp_min']:6.3f}%")
    print(f"RMS Δp    : {100 * s['dp_rms']:6.3f} ± {100 * s['dp_rms_unc']:5.3f} %")
    print(f"Same top p: {100 * s['same_top']:6.3f} ± {100 * s['same_top_unc']:5.3f} %")


# ---- llama.cpp's per-row arithmetic (numpy, float32 as perplexity.cpp) --------------------------

def pack_base(np, rows):
    """The uint16 log-probabilities llama.cpp stores per base row: (scale[n], min_log_prob[n],
    codes[n][V]). rows: float32 [n][V]."""
    f32 = np.float32
    mx = rows.max(axis=1)
    mn = np.maximum(rows.min(axis=1), mx - f32(16))
    sum_exp = np.exp(rows - mx[:, None]).astype(np.float64).sum(axis=1)
    lse = np.log(sum_exp).astype(f32)
    min_log_prob = (mn - mx) - lse
    scale = (mx - mn) / f32(65535)
    codes = np.zeros(rows.shape, np.uint16)
    for i in range(rows.shape[0]):
        if scale[i] != 0:
            inv = f32(1) / scale[i]
            c = np.rint(inv * (rows[i] - mn[i]))          # nearest_int: round half to even
            codes[i] = np.where(rows[i] > mn[i], c, 0).astype(np.uint16)
    return scale, min_log_prob, codes


def exact_kl(np, base_row, row):
    """KL(base || model) over the full vocabulary in float64 from the two raw logit rows."""
    a, b = base_row.astype(np.float64), row.astype(np.float64)
    la = a - a.max() - np.log(np.exp(a - a.max()).sum())
    lb = b - b.max() - np.log(np.exp(b - b.max()).sum())
    return float(np.sum(np.exp(la) * (la - lb)))


def score_rows(np, acc, rows, base, tokens_next, base_rows=None, exact=None):
    """Adds each row of rows (float32 [n][V], the model's) against base (pack_base of the base's
    rows at the same positions) to acc; tokens_next[n] are the scored tokens. With base_rows (the
    base's raw rows), appends (llama.cpp's KLD, the exact float64 KL) of each row to exact."""
    f32 = np.float32
    scale, min_log_prob, codes = base
    for i in range(rows.shape[0]):
        l = rows[i]
        tok = int(tokens_next[i])
        imax = int(np.argmax(l))
        mx = l[imax]
        lse = f32(math.log(float(np.exp(l - mx).astype(np.float64).sum())))
        nll = float((mx + lse) - l[tok])
        plb = scale[i] * codes[i].astype(f32) + min_log_prob[i]      # base log-probs, float32
        nll_base = float(-(scale[i] * f32(codes[i][tok]) + min_log_prob[i]))
        imax_base = int(np.argmax(plb))
        m = mx + lse
        keep = plb > f32(-16)
        pb = np.exp(plb[keep])
        kld = float((pb * ((plb[keep] - l[keep]) + m)).astype(np.float64).sum())
        p_diff = float(np.exp(f32(-nll)) - np.exp(f32(-nll_base)))
        acc.add(kld, nll, nll_base, p_diff, imax == imax_base)
        if base_rows is not None:
            exact.append((kld, exact_kl(np, base_rows[i], l)))


# ---- the text, the models, llama.cpp --------------------------------------------------------------

def read_text(path):
    if path:
        with open(path, encoding="utf-8") as f:
            return f.read()
    out = subprocess.run(KJV_COMMAND, check=True, capture_output=True).stdout.decode("utf-8")
    return VERSE_LABEL.sub("", out)


def make_models(out_dir):
    import numpy as np
    import gguf
    src = os.path.join(os.environ.get("STRATA_CACHE", os.path.expanduser("~/.cache/strata")),
                       "smollm2-135m-instruct-q4_1.gguf")
    os.makedirs(out_dir, exist_ok=True)
    r = gguf.GGUFReader(src)
    for name, q8 in (("smollm2-f32.gguf", False), ("smollm2-q8_0.gguf", True)):
        w = gguf.GGUFWriter(os.path.join(out_dir, name), r.fields["general.architecture"].contents())
        for k, f in r.fields.items():
            if k.startswith("GGUF.") or k == "general.architecture":
                continue
            vt = f.types[0]
            sub = f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None
            val = f.contents()
            if k == "general.file_type":
                val = 7 if q8 else 0        # MOSTLY_Q8_0 / ALL_F32
            w.add_key_value(k, val, vt, sub_type=sub)
        w.add_string("strata.fixture.source", os.path.basename(src))
        for t in r.tensors:
            ne = [int(x) for x in t.shape]
            vals = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type)
            vals = np.ascontiguousarray(vals.reshape(list(reversed(ne))), dtype=np.float32)
            if q8 and len(ne) == 2 and ne[0] % 32 == 0:
                q = gguf.quants.quantize(vals, gguf.GGMLQuantizationType.Q8_0)
                w.add_tensor(t.name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            else:
                w.add_tensor(t.name, vals)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        print(f"wrote {os.path.join(out_dir, name)}")


def lcpp_rows(lcpp, path, chunks, n_ctx, first):
    """llama.cpp's rows at the scored positions of every chunk: a list of float32 [n_ctx-1-first][V]."""
    m = lcpp.Model(path)
    try:
        ctx = m.context(n_ctx, type_k=lcpp.F16, type_v=lcpp.F16, flash_attn=lcpp.FA_AUTO,
                        n_threads=2, n_batch=512, n_ubatch=512)
        try:
            out = []
            for c in chunks:
                ctx.clear()
                out.append(ctx.decode(c, 0, True)[first:n_ctx - 1].copy())
            return out
        finally:
            ctx.close()
    finally:
        m.close()


def strata_acc(driver, work, base, models, chunks, n_ctx, first):
    """One strata sweep per chunk (reference arm: base with f16 KV; each model an --arm-model arm
    with the same KV), its positions.tsv read at the scored positions: {name: Acc}."""
    accs = {name: Acc() for name, _ in models}
    for ci, c in enumerate(chunks):
        ids = os.path.join(work, f"chunk-{ci}.ids")
        with open(ids, "w") as f:
            f.write(" ".join(str(t) for t in c) + "\n")
        out = os.path.join(work, f"sweep-{ci}")
        cmd = [driver, "sweep", "--model", base, "--arms", "f16", "--tokens-file", ids,
               "--depths", "1", "--max-depth", str(n_ctx - 1), "--fork", "1", "--per-position",
               "--threads", "1", "--quiet", "--force", "--out", out]
        for name, path in models:
            cmd += ["--arm-model", f"{name}={path}"]
        if ci == 0:
            print("strata:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "positions.tsv")) as f:
            head = f.readline().rstrip("\n").split("\t")
            col = {h: i for i, h in enumerate(head)}
            for line in f:
                v = line.rstrip("\n").split("\t")
                pos = int(v[col["pos"]])
                if first <= pos <= n_ctx - 2:
                    nll, nll_ref = float(v[col["nll_arm"]]), float(v[col["nll_ref"]])
                    accs[v[col["arm"]]].add(float(v[col["kl_ref_arm"]]), nll, nll_ref,
                                            math.exp(-nll) - math.exp(-nll_ref), v[col["same_top1"]] == "1")
    return accs


def run(args):
    import numpy as np
    sys.path.insert(0, HERE)
    import lcpp
    lcpp.quiet()
    opt = {"--ctx": "512", "--chunks": "8", "--text": None, "--base": None, "--strata": None, "--work": None}
    models = []
    i = 0
    while i < len(args):
        if args[i] == "--model" and i + 1 < len(args) and "=" in args[i + 1]:
            models.append(tuple(args[i + 1].split("=", 1)))
        elif args[i] in opt and i + 1 < len(args):
            opt[args[i]] = args[i + 1]
        else:
            sys.exit(f"lcpp_kld.py run: unexpected '{args[i]}' (see the header)")
        i += 2
    if not opt["--base"] or not models:
        sys.exit("lcpp_kld.py run: --base FILE and at least one --model NAME=FILE are needed")
    n_ctx, first = int(opt["--ctx"]), int(opt["--ctx"]) // 2
    bm = lcpp.Model(opt["--base"])
    try:
        tokens = bm.tokenize(read_text(opt["--text"]), bm.add_bos, False)
        add_bos, bos = bm.add_bos, int(lcpp.L.llama_vocab_bos(bm.vocab))
    finally:
        bm.close()
    n_chunk = min(int(opt["--chunks"]), len(tokens) // n_ctx)
    chunks = []
    for c in range(n_chunk):
        ids = tokens[c * n_ctx:(c + 1) * n_ctx]
        if add_bos:
            ids[0] = bos
        chunks.append(ids)
    print(f"{len(tokens)} tokens; {n_chunk} chunks of {n_ctx}; scored positions {first}..{n_ctx - 2} of each "
          f"({n_chunk * (n_ctx - 1 - first)} rows); add_bos {add_bos}; llama-cpp-python {lcpp.L.__version__}, "
          f"KV f16, flash attention auto", flush=True)
    base_rows = lcpp_rows(lcpp, opt["--base"], chunks, n_ctx, first)
    base = [pack_base(np, r) for r in base_rows]
    results = {}
    for name, path in models:
        acc, exact = Acc(), []
        rows = lcpp_rows(lcpp, path, chunks, n_ctx, first)
        for ci, c in enumerate(chunks):
            score_rows(np, acc, rows[ci], base[ci], c[first + 1:n_ctx], base_rows[ci], exact)
        del rows
        results[name] = acc.summary()
        print_summary(f"llama.cpp: KL(base || {name}), base {os.path.basename(opt['--base'])}, "
                      f"model {os.path.basename(path)}", results[name])
        dev = max(abs(a - b) for a, b in exact)
        print(f"(the same rows, KL over the full vocabulary in float64 without the uint16 log-probs and the -16 "
              f"cut: mean {sum(b for _, b in exact) / len(exact):.6f}; largest per-row difference {dev:.3g})")
    if opt["--strata"]:
        work = opt["--work"] or "/tmp/strata-kld"
        os.makedirs(work, exist_ok=True)
        accs = strata_acc(opt["--strata"], work, opt["--base"], models, chunks, n_ctx, first)
        for name, _ in models:
            s = accs[name].summary()
            print_summary(f"strata: kl_ref_arm of arm {name} (reference: the base, f16 KV)", s)
            r = results[name]
            print(f"| {name} | llama.cpp {r['kld']:.6f} ± {r['kld_unc']:.6f} | strata {s['kld']:.6f} ± "
                  f"{s['kld_unc']:.6f} | same top {100 * r['same_top']:.3f} % / {100 * s['same_top']:.3f} % | "
                  f"RMS Δp {100 * r['dp_rms']:.3f} % / {100 * s['dp_rms']:.3f} % |")
    return 0


# ---- selftest: the statistics against cases worked by hand ---------------------------------------

def selftest():
    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print(f"FAIL - {what}")

    def near(a, b, tol=1e-12):
        return abs(a - b) <= tol * max(1.0, abs(b))

    # 1..12: mean 6.5, population variance (12^2 - 1) / 12 = 143/12, error sqrt(143/12 / 11)
    xs = list(range(1, 13))
    m, u = mean_and_uncertainty(sum(xs), sum(x * x for x in xs), len(xs))
    check(near(m, 6.5) and near(u, math.sqrt(143 / 12 / 11)), f"mean_and_uncertainty 1..12: {m} {u}")
    m, u = mean_and_uncertainty(10.0, 30.0, 10)          # n <= 10: no error (llama.cpp's rule)
    check(m == 1.0 and u == 0.0, f"mean_and_uncertainty n = 10: {m} {u}")
    check(mean_and_uncertainty(0.0, 0.0, 0) == (0.0, 0.0), "mean_and_uncertainty n = 0")
    # y = 2x over 1..12: covariance = 2 * 143/12 / 11
    check(near(covariance(78.0, 156.0, 2.0 * 650, 12), 2 * 143 / 12 / 11), "covariance y = 2x")
    check(covariance(1.0, 1.0, 1.0, 9) == 0.0, "covariance n < 10")
    v = [0.0, 1.0, 2.0, 4.0, 8.0]
    check(percentile(v, 0.5) == 2.0, "percentile 0.5 of 5 values")
    check(near(percentile(v, 0.9), 0.4 * 4.0 + 0.6 * 8.0), "percentile 0.9: between the 4th and 5th")
    check(percentile(v, 0.0) == 0.0 and percentile(v, 1.0) == 8.0, "percentile ends")
    check(median(v) == 2.0 and median([1.0, 2.0, 4.0, 8.0]) == 3.0, "median odd / even")
    # a two-token hand case: base p = (3/4, 1/4), model q = (1/2, 1/2), next token 0, 12 rows
    kl = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    acc = Acc()
    for _ in range(12):
        acc.add(kl, -math.log(0.5), -math.log(0.75), 0.5 - 0.75, True)
    s = acc.summary()
    check(near(s["kld"], kl) and s["kld_unc"] < 1e-9, f"summary mean KLD {s['kld']} vs {kl}")
    check(near(s["ln_ratio"], math.log(0.75 / 0.5)), "summary ln(PPL(Q)/PPL(base)) = ln(1.5)")
    check(near(s["dp"], -0.25) and near(s["dp_rms"], 0.25), "summary Δp mean and RMS")
    check(s["same_top"] == 1.0 and s["n"] == 12, "summary same top and count")
    acc.add(0.0, 0.0, 0.0, 0.0, False)
    check(near(acc.summary()["same_top"], 12 / 13), "same top after a disagreeing row")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "selftest":
        return selftest()
    if len(sys.argv) == 3 and sys.argv[1] == "make-models":
        make_models(sys.argv[2])
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "run":
        return run(sys.argv[2:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
