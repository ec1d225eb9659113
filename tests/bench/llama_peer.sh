# shellcheck shell=bash
# llama_peer.sh — sourced by tests/bench/bench.sh (and tests/benchpeer.test.sh): how the speed peer,
# llama.cpp through llama-cpp-python, is built and what is said when it dies.
#
# lcpp_cmake_isa [CPUINFO]: llama.cpp's CMake instruction-set options for this CPU, on one line.
#   GGML_NATIVE=OFF always (its -march=native trusts every flag the CPU lists, and a VM may list
#   AMX that it cannot execute: llama.cpp then dies with SIGILL in its AMX kernels), and every
#   x86 option set ON or OFF explicitly from the "flags" line of CPUINFO (default /proc/cpuinfo;
#   with GGML_NATIVE=OFF ggml would otherwise turn SSE4.2/AVX/AVX2/BMI2/FMA/F16C on by default):
#     GGML_SSE42 sse4_2   GGML_AVX avx   GGML_AVX2 avx2   GGML_BMI2 bmi2   GGML_FMA fma
#     GGML_F16C f16c      GGML_AVX_VNNI avx_vnni
#     GGML_AVX512 avx512f and avx512cd avx512vl avx512dq avx512bw (ggml compiles with all five)
#     GGML_AVX512_VBMI avx512vbmi, GGML_AVX512_VNNI avx512_vnni, GGML_AVX512_BF16 avx512_bf16
#       (each only with GGML_AVX512)
#     GGML_AMX_TILE / _INT8 / _BF16: OFF unless BENCH_LLAMA_AMX=1 (then amx_tile / amx_int8 /
#       amx_bf16 as listed, with GGML_AVX512)
#   A CPU without a "flags" line (not x86: AArch64 has "Features") gets -DGGML_NATIVE=ON: the
#   x86 options do not apply there and its native detection has not been seen to fail.
# the three helpers read the flags string of the calling lcpp_cmake_isa (" f1 f2 ... ")
lcpp__has() { case "$flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
lcpp__all() { local x; for x in "$@"; do lcpp__has "$x" || return 1; done; }
lcpp__onoff() { if lcpp__all "$@"; then echo ON; else echo OFF; fi; }
lcpp_cmake_isa() {
    local info=${1:-/proc/cpuinfo} flags f out avx512=OFF
    local a512="avx512f avx512cd avx512vl avx512dq avx512bw"
    flags=" $(grep -m1 '^flags' "$info" 2>/dev/null | cut -d: -f2-) "
    if [ "$flags" = "  " ]; then
        echo "-DGGML_NATIVE=ON"
        return 0
    fi
    out="-DGGML_NATIVE=OFF"
    out+=" -DGGML_SSE42=$(lcpp__onoff sse4_2) -DGGML_AVX=$(lcpp__onoff avx) -DGGML_AVX2=$(lcpp__onoff avx2)"
    out+=" -DGGML_BMI2=$(lcpp__onoff bmi2) -DGGML_FMA=$(lcpp__onoff fma) -DGGML_F16C=$(lcpp__onoff f16c)"
    out+=" -DGGML_AVX_VNNI=$(lcpp__onoff avx_vnni)"
    # shellcheck disable=SC2086  # a512: the five flag names, split on purpose
    lcpp__all $a512 && avx512=ON
    out+=" -DGGML_AVX512=$avx512"
    for f in VBMI:avx512vbmi VNNI:avx512_vnni BF16:avx512_bf16; do
        # shellcheck disable=SC2086
        out+=" -DGGML_AVX512_${f%%:*}=$(lcpp__onoff $a512 "${f#*:}")"
    done
    for f in TILE:amx_tile INT8:amx_int8 BF16:amx_bf16; do
        if [ "${BENCH_LLAMA_AMX:-0}" = 1 ] && [ $avx512 = ON ] && lcpp__has "${f#*:}"; then
            out+=" -DGGML_AMX_${f%%:*}=ON"
        else
            out+=" -DGGML_AMX_${f%%:*}=OFF"
        fi
    done
    echo "$out"
}

# lcpp_exit_note RC: one line about the peer's exit status RC (nothing for 0). 132 = 128 + SIGILL:
# the build uses an instruction this CPU (or VM) does not execute.
lcpp_exit_note() {
    local rc=$1
    [ "$rc" = 0 ] && return 0
    if [ "$rc" = 132 ]; then
        echo "llama.cpp CRASHED with SIGILL (exit 132): its build executes an instruction this CPU does not run" \
             "(AMX or AVX-512 listed but not executable?); its figures are missing below. Remove the venv to" \
             "rebuild it with explicit flags (tests/bench/llama_peer.sh; AMX only with BENCH_LLAMA_AMX=1)."
    elif [ "$rc" -gt 128 ]; then
        echo "llama.cpp died with signal $((rc - 128)) (exit $rc); its figures are missing or partial below."
    else
        echo "llama.cpp's bench exited with status $rc; its figures are missing or partial below."
    fi
}

# lcpp_ratio_table JSONL DEPTHS OURS: the markdown table strata / llama.cpp. JSONL: the lines of
# tests/bench/llamacpp_bench.py (may be empty, or cut short by a crash: such lines are skipped);
# DEPTHS: the decode depths llama.cpp was asked for ("512 8192"); OURS: strata's figures as
# "phase,kv,L=tok/s ..." (kv f16 or int8). Every strata figure gets a row: "-" where llama.cpp has
# none (strata's decode figures at lengths other than DEPTHS are left out, as llama.cpp has none
# there by design). The system python3 (json only): the table comes out without the venv.
lcpp_ratio_table() {
    python3 - "$1" "$2" "$3" <<'PYEOF'
import json, sys
jsonl, depths, ours_s = sys.argv[1], [int(d) for d in sys.argv[2].split()], sys.argv[3]
ours = {k: float(v) for k, v in (kv.split("=") for kv in ours_s.split())}
print("  | phase | L | strata kv | tok/s | llama.cpp kv | tok/s | ratio |")
print("  |---|---:|---|---:|---|---:|---:|")
seen = set()
try:
    lines = open(jsonl).read().splitlines()
except OSError:
    lines = []
for line in lines:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if "error" in r:
        print("  llama.cpp refused", r.get("kv"), r.get("flash_attn"), r["error"])
        continue
    kv = "f16" if r["kv"] == "f16" else "int8"
    L = r["tokens"] if r["phase"] == "prefill" else r["depth"]
    key = f'{r["phase"]},{kv},{L}'
    if key in ours:
        seen.add(key)
        print(f'  | {r["phase"]} {"at" if r["phase"] == "decode" else "of"} | {L} | {kv} | {ours[key]:.1f} | '
              f'{r["kv"]} | {r["tokens_per_s"]:.1f} | {ours[key] / r["tokens_per_s"]:.2f} |')
order = lambda k: (k.split(",")[0] != "prefill", k.split(",")[1], int(k.split(",")[2]))
for key in sorted(set(ours) - seen, key=order):
    phase, kv, L = key.split(",")
    if phase == "decode" and int(L) not in depths:
        continue
    print(f'  | {phase} {"at" if phase == "decode" else "of"} | {L} | {kv} | {ours[key]:.1f} | '
          f'{"f16" if kv == "f16" else "q8_0"} | - | - |')
PYEOF
}
