#!/usr/bin/env bash
# make_report_seeds.sh — the report reader fuzzer's seed corpus (tests/fuzz/corpus/report/): small
# results folders as fuzz_report.c reads them, the files joined by NUL bytes in the order meta.json,
# depths.tsv, forks.tsv, positions.tsv, cross.tsv, samples.tsv, cross_samples.tsv (later ones absent).
# empty-forks.bin is not made here: the fuzzer found it (an empty forks.tsv), kept as a regression.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 - << 'PY'
import json, os
out = "tests/fuzz/corpus/report"
os.makedirs(out, exist_ok=True)
T = "\t"
DH = T.join("depth arm kl_arm_ref kl_ref_arm js same_top1 top1_arm top1_ref nll_arm nll_ref entropy_ref "
            "gap_ref gap_arm fork censored fork_gap_arm fork_gap_ref".split())
FH = T.join("depth arm fork censored tokens_arm tokens_ref".split())
PH = T.join("pos arm kl_arm_ref kl_ref_arm js same_top1 nll_arm nll_ref entropy_ref gap_ref".split())
XH = T.join("depth arm fork censored n ref_nll_arm_text ref_nll_ref_text f32_nll_arm_text f32_nll_ref_text "
            "rep_arm rep_ref".split())
SH = T.join("depth arm temperature top_p seed fork censored tokens_arm tokens_ref".split())

def meta(tag="seed", **kw):
    m = {"tag": tag, "date": "2026-12-01", "command": "strata-driver sweep", "git": "abc", "engine": "strata",
         "machine": {"cpu": "x"}, "model": {"path": "m.gguf", "sha256": "00", "arch": "llama", "n_vocab": 512,
         "n_ctx": 512, "n_layer": 5}, "document": {"path": "d.txt", "n_tokens": 100, "description": "doc"},
         "ref": "f16", "arms": [{"name": "f32", "kv_k": "f32", "kv_v": "f32", "kv_bytes_per_token": 4096},
         {"name": "f16", "kv_k": "f16", "kv_v": "f16", "kv_bytes_per_token": 2048},
         {"name": "int8", "kv_k": "int8", "kv_v": "int8", "kv_bytes_per_token": 1100},
         {"name": "f16#2", "kv_k": "f16", "kv_v": "f16"}],
         "depths": [10, 20], "fork_n": 4, "per_position": True, "warnings": ["w"], "complete": True}
    m.update(kw)
    return json.dumps(m)

def rows(torn=False):
    d, f, p, x, s = [DH], [FH], [PH], [XH], [SH]
    for a, kl in (("f32", 1e-6), ("int8", 1e-3), ("f16#2", 0.0)):
        for dep in (10, 20):
            cen = 1 if kl == 0 else 0
            fork = 4 if cen else 2
            gaps = "nan\tnan" if cen else "0.5\t0.25"
            d.append(f"{dep}\t{a}\t{kl}\t{kl}\t{kl / 4}\t1\t7\t7\t2.5\t2.5\t1.5\t0.75\t0.5\t{fork}\t{cen}\t{gaps}")
            ta = "1,2,3,4" if cen else "1,2,9,9"
            f.append(f"{dep}\t{a}\t{fork}\t{cen}\t{ta}\t1,2,3,4")
            x.append(f"{dep}\t{a}\t{fork}\t{cen}\t4\t2.5\t2.4\tnan\tnan\t0\t0")
            s.append(f"{dep}\t{a}\t0.8\t0.95\t7\t{fork}\t{cen}\t{ta}\t1,2,3,4")
        for pos in range(20):
            p.append(f"{pos}\t{a}\t{kl}\t{kl}\t{kl / 4}\t1\t2.5\t2.5\t1.5\t0.75")
    j = lambda r: "\n".join(r) + "\n"
    parts = [j(d), j(f), j(p), j(x), j(s)]
    if torn:
        parts[0] += "30\tint8\t0.1"
    return parts

def put(name, parts):
    with open(os.path.join(out, name), "wb") as fh:
        fh.write(b"\0".join(q.encode() for q in parts))

r = rows()
put("full.bin", [meta()] + r)
put("minimal.bin", [meta(per_position=False)] + r[:2])
put("torn.bin", [meta(complete=False, status="running", depths=[10, 20, 30])] + rows(torn=True)[:3])
put("hostile-tag.bin", [meta(tag="x\" ; system(\"touch pwn\") ; `id` \\\n'q'")] + r[:2])
put("bad-header.bin", [meta(), DH.replace("js", "jz") + "\n"] + r[1:2])
put("long-line.bin", [meta(), DH + "\n" + "1" * 5000] + r[1:2])
print(len(os.listdir(out)))
PY
