#!/usr/bin/env bash
# make bench — speed figures and ratios, printed; nothing is asserted (DEVELOPERS: speed is checked by
# a benchmark, not by timed tests). Run it on an otherwise idle machine: with 2 cores, any other busy
# process halves what is measured (the 1-minute load average is printed beside the figures).
#   1. strata-worker vs llama.cpp (llama-cpp-python, built into tests/.venv on first use) on SmolLM2:
#      (ISA=avx2, from `make bench ISA=avx2`: this table for the native build, then again for strata
#      built with -march=haswell against llama.cpp built for AVX2/FMA/F16C into tests/.venv-avx2)
#      prefill tokens/s at 512 / 2K / 8K, decode tokens/s at depth 512 / 8K, KV f16 and int8 (llama.cpp:
#      f16 and q8_0, its closest 8-bit format), 2 threads, as ratios strata / llama.cpp.
#   2. attention alone at 8K: every KV format against f16 (tests/bench/bench_attn.c): each base format,
#      each with +rot, +roth and +rotp, tq3 / tq4 and kivi2 / kivi4 (69 formats).
#   3. the sweep's overhead: wall time of a one-pass sweep / (one max-depth prefill + 16 fork probes).
#   4. per-position streaming: rows/s and GB/s through the driver; the comparison alone per position,
#      SmolLM2's and Gemma 3's vocabulary (tests/bench/bench_compare.c).
#   5. weight types: dequantisation and decode dot values/s per type, 1 thread (tests/bench/bench_quant.c).
#   6. endurance: two listening workers serve 20 sequential sweeps; their RSS after each (endurance.sh).
#   7. a long run's cost: a two-arm (f16, int8) 16-depth per-position sweep of Gemma 3 270M to 32K,
#      its wall time against the sum of its parts at the roofline (BENCH_LONG=0 skips it, ~30 min;
#      BENCH_LONG_DEPTH=N; BENCH_LONG_ONLY=1 runs it alone).
#   (after 1) the roofline: read bandwidth and FMA peak measured in the same run, and each decode /
#      prefill figure as a fraction of its limit (SmolLM2 and Gemma 3, f16 / int8 / q4_0, 1 and 2
#      threads, depths 512 / 8K, 32K with BENCH_DEEP=1; then attention alone at those depths against
#      the FMA peak; BENCH_ROOF_ONLY=1 runs it alone).
# The peer is built with explicit instruction-set flags from /proc/cpuinfo, not GGML_NATIVE (which
# trusts every listed flag: on a VM that lists AMX but cannot run it llama.cpp died with SIGILL), AMX
# only with BENCH_LLAMA_AMX=1 (tests/bench/llama_peer.sh); if it dies all the same, one line says so
# (SIGILL: exit 132) and strata's figures still come out in the table. BENCH_LLAMA_FLAGS_ONLY=1
# prints the flags the peer would be built with and stops (a dry run: nothing is built or run).
# BENCH_QUICK=1 skips llama.cpp and the 8K lengths; BENCH_SHORT=1 only the 8K lengths;
# BENCH_RATIOS_ONLY=1 stops after section 1; BENCH_REPEAT=N (default 3): section 1 takes each engine's
# best of N runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/llama_peer.sh   # lcpp_cmake_isa, lcpp_exit_note
if [ "${BENCH_LLAMA_FLAGS_ONLY:-0}" = 1 ]; then
  echo "native: $(lcpp_cmake_isa)"
  exit 0
fi
BUILD=${BUILD:-build}
# ISA=avx2 (make bench ISA=avx2): strata was built with -march=haswell into build-avx2, and
# llama.cpp is built into its own venv with its native detection off and AVX2/FMA/F16C on, so any
# x86 machine measures the AVX2 ratio; empty: both native
ISA=${ISA:-}
CACHE=${STRATA_CACHE:-$HOME/.cache/strata}
MODEL=$CACHE/smollm2-135m-instruct-q4_1.gguf
W=$BUILD/strata-worker
D=$BUILD/strata-driver
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
echo "strata bench  $(date -u +%FT%TZ)  git $(git rev-parse --short HEAD)  $(nproc) cores  load $(load)  ISA ${ISA:-native}"
echo "CPU: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed "s/^ *//"); flags: $(grep -m1 -o -w -E "avx512f|avx2|fma|f16c" /proc/cpuinfo | sort -u | tr "\n" " ")"
[ "${BENCH_QUICK:-0}" = 1 ] || { [ -n "$ISA" ] && [ "$ISA" != avx2 ]; } || echo "llama.cpp peer build (native): $(lcpp_cmake_isa)"

# a long token stream: the repository's sources tokenised by the model
corpus() { cat worker/*.c driver/*.c driver/*/*.c proto/*.c kernels/*.c tests/*.c README.md; }
corpus | "$W" --model "$MODEL" --tokenize >"$TMP/all.ids"
tr ' ' '\n' <"$TMP/all.ids" >"$TMP/all.col"
ids() { head -n "$1" "$TMP/all.col" | tr '\n' ' ' >"$TMP/ids.$1"; echo "$TMP/ids.$1"; }
# min_field KEY LINE BEST: the smaller of KEY=value in the worker's timing LINE and BEST (empty: none yet)
min_field() { sed -E "s/.*$1=([0-9.]+).*/\\1/" <<<"$2" | awk -v b="$3" '{ print (b == "" || $1 < b) ? $1 : b }'; }

LENS="512 2048 8192"; DEPTHS="512 8192"
# each engine's figure: the best of REPEAT runs (the decode of 32 tokens moves by +-10 % from one run
# to the next on a 2-core VM, with the memory bandwidth it gets)
REPEAT=${BENCH_REPEAT:-3}
[ "${BENCH_QUICK:-0}" = 1 ] || [ "${BENCH_SHORT:-0}" = 1 ] && { LENS="512 2048"; DEPTHS="512"; }

# 1. strata vs llama.cpp for one instruction set: section1 LABEL BUILD VENV CMAKE_ISA
#    LABEL   "native" or "avx2"; BUILD the strata build folder; VENV the llama-cpp-python venv;
#    CMAKE_ISA llama.cpp's instruction-set options (its native detection, or AVX2/FMA/F16C only)
section1() {
  local label=$1 build=$2 venv=$3 cmake_isa=$4 kv L t pt dt
  local w=$build/strata-worker
  declare -A OURS
  echo
  echo "== [$label] strata-worker ($build), SmolLM2-135M Q4_1, 2 threads, prefill chunk 512, best of $REPEAT runs"
  for kv in f16 int8; do
    for L in $LENS; do
      pt=; dt=   # the best of BENCH_REPEAT runs, each phase on its own (as llamacpp_bench.py --repeat)
      for ((r = 0; r < REPEAT; r++)); do
        t=$("$w" --model "$MODEL" --kv $kv --threads 2 --prefill 512 --max-context $((L + 64)) --tokens-file "$(ids $L)" --max-new 33 --timing 2>&1 >/dev/null | grep "^timing:")
        pt=$(min_field prefill_s "$t" "$pt"); dt=$(min_field decode_s "$t" "$dt")
      done
      OURS[prefill,$kv,$L]=$(awk -v n=$L -v s=$pt 'BEGIN{printf "%.1f", n/s}')
      OURS[decode,$kv,$L]=$(awk -v s=$dt 'BEGIN{printf "%.1f", 32/s}')
      printf '  kv %-5s L %5d  prefill %8s tok/s  decode@%d %6s tok/s  (load %s)\n' $kv $L "${OURS[prefill,$kv,$L]}" $L "${OURS[decode,$kv,$L]}" "$(load)"
    done
  done
  [ "${BENCH_QUICK:-0}" = 1 ] && return 0

  # llama.cpp on the same model, threads and lengths, built into its venv on first use with
  # cmake_isa, which is recorded in $venv/strata-llama-cmake; a venv built otherwise (e.g. by
  # tests/ref/README.md's GGML_NATIVE=ON setup) is used as it is, with a note
  local py=$venv/bin/python stamp=$venv/strata-llama-cmake rc=0 built
  : >"$TMP/lcpp.$label.jsonl"
  if ! "$py" -c 'import llama_cpp' 2>/dev/null; then
    echo "(building llama-cpp-python into $venv with $cmake_isa: takes 10-15 minutes)"
    [ -x "$py" ] || python3 -m venv "$venv"
    # --no-cache-dir: pip's wheel cache does not key on CMAKE_ARGS, so a wheel built for one ISA
    # would be reused for the other
    if CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$cmake_isa -DLLAVA_BUILD=OFF" \
        "$py" -m pip install -q --no-cache-dir numpy gguf llama-cpp-python==0.3.36; then
      echo "$cmake_isa" >"$stamp"
    else
      rc=$?
      echo "llama-cpp-python did not build (pip exit $rc): no llama.cpp figures for [$label]"
    fi
  fi
  built=$(cat "$stamp" 2>/dev/null || echo "unrecorded flags")
  [ "$built" = "$cmake_isa" ] || [ $rc != 0 ] ||
    echo "(note: $venv's llama.cpp was built with $built, not $cmake_isa; remove $venv to rebuild it)"
  if [ $rc = 0 ]; then
    echo
    echo "== [$label] llama.cpp (llama-cpp-python in $venv), same model, 2 threads, n_batch 512, flash attention as it defaults, best of $REPEAT"
    "$py" tests/bench/llamacpp_bench.py --model "$MODEL" --threads 2 --prefill "${LENS// /,}" --depths "${DEPTHS// /,}" \
        --kv f16,q8_0 --fa auto --repeat "$REPEAT" >"$TMP/lcpp.$label.jsonl" || rc=$?
    lcpp_exit_note $rc
  fi
  echo
  echo "== [$label] ratios strata / llama.cpp (> 1: strata is faster; \"-\": no llama.cpp figure)"
  lcpp_ratio_table "$TMP/lcpp.$label.jsonl" "$DEPTHS" "$(for k in "${!OURS[@]}"; do printf '%s=%s ' "$k" "${OURS[$k]}"; done)"
}

# 0. the roofline (issue 25): the machine's limits (tests/bench/bench_roof.c) and, for each model,
#    KV format, thread count and depth, strata's decode rate against what the memory could feed
#    (bandwidth / (weight bytes + KV bytes read per token)) and its prefill rate against the f32 FMA
#    peak of the build's SIMD family (ROOF_FAMILY; the widest the CPU has for a native build)
#    (2·the layers' matrix params per token, the output head
#    for the one row the prefill returns, and 2·n_head·head_dim·L² per layer for QKᵀ and PV over the
#    causal half; strata keeps activations in f32, so the f32 FMA peak is its roof). Gemma 3: 1 layer in 6 reads the whole context,
#    the others the last `window` positions. BENCH_DEEP=1 adds depth 32K; BENCH_ROOF_ONLY=1 stops
#    after this section.
# The roofline's arithmetic, shared by the roofline and the long run (awk functions): m is
# bench_roof's model line, roof its roof lines (key=value words).
ROOF_AWK='
  function f(s, k,  r) { r = s; if (!sub(".*" k "=", "", r)) return 0; sub(/ .*/, "", r); return r + 0 }
  function bpv(kv) { return kv == "f16" ? 2 : kv == "int8" ? 8.25 / 8 : 4.5 / 8 }   # KV bytes per value
  # KV bytes a decode token at depth L reads: K and V of every layer over the keys it attends to
  function kv_read(m, kv, L,  nl, ng, win, ctxl) {
    nl = f(m, "n_layer"); ng = f(m, "global_layers"); win = f(m, "window"); ctxl = (win > 0 && win < L) ? win : L
    return 2 * f(m, "n_head_kv") * f(m, "head_dim") * bpv(kv) * (ng * L + (nl - ng) * ctxl)
  }
  # flops of a prefill of L tokens returning `rows` logit rows: the layers matrices, the output head
  # per row, QK and PV over the causal half (global layers over L, local ones over the window)
  function prefill_flops(m, L, rows,  nl, ng, win, att) {
    nl = f(m, "n_layer"); ng = f(m, "global_layers"); win = f(m, "window")
    att = 2 * f(m, "n_head") * f(m, "head_dim") * (ng * L * L + (nl - ng) * (win > 0 && win < L ? (2 * L - win) * win : L * L))
    return 2 * f(m, "matmul_params") * L + 2 * f(m, "head_params") * rows + att
  }
  # the f32 FMA peak (GFLOP/s) with T threads of the build'"'"'s SIMD family (ROOF_FAMILY), else of the
  # widest family measured
  function peak(roof, T,  p) {
    if (ENVIRON["ROOF_FAMILY"] != "" && (p = f(roof, "fma_" ENVIRON["ROOF_FAMILY"] "_" T)) > 0) return p
    p = f(roof, "fma_avx512_" T); if (p == 0) p = f(roof, "fma_avx2_" T); if (p == 0) p = f(roof, "fma_c_" T)
    return p
  }'

# the family the strata build computes with: an AVX2 build (ISA=avx2, build-avx2/) is held to the
# AVX2 peak even on a machine that also has AVX-512
case "${ISA:-}:$BUILD" in
  avx2:* | *:*-avx2) export ROOF_FAMILY=avx2 ;;
  c:* | *:*-c) export ROOF_FAMILY=c ;;
  *) export ROOF_FAMILY= ;;
esac

roofline() {
  local w=$BUILD/strata-worker m model lim kv T L t pt dt
  echo
  echo "== roofline: limits measured now (tests/bench/bench_roof.c), 1 and 2 threads"
  "$BUILD/bench/bench_roof" "$MODEL" 2 >"$TMP/roof" || { echo "  bench_roof failed"; return 0; }
  local roofs; roofs=$(grep '^roof' "$TMP/roof" | tr '\n' ' ')   # the limits as key=value words
  grep '^roof' "$TMP/roof" | sed 's/^roof /  /' | tr '\n' ' '; echo
  local depths="512 8192"; [ "${BENCH_DEEP:-0}" = 1 ] && depths="512 8192 32768"
  depths=${BENCH_ROOF_DEPTHS:-$depths}   # e.g. "64" for a smoke run
  for model in "$MODEL" "$CACHE/gemma-3-270m-q4_k_m.gguf"; do
    [ -f "$model" ] || { echo "  (no $model: make models)"; continue; }
    m=$("$BUILD/bench/bench_roof" "$model" 1 2>/dev/null | grep '^model' | head -1)
    [ -n "$m" ] || continue
    echo "  $(basename "$model"): $m"
    printf '  %-6s %2s %6s %10s %10s %7s %10s %10s %7s\n' kv thr L prefill/s roof/s frac decode/s roof/s frac
    for kv in f16 int8 q4_0; do
      for T in 1 2; do
        for L in $depths; do
          t=$("$w" --model "$model" --kv $kv --threads $T --prefill 512 --max-context $((L + 64)) --tokens-file "$(ids $L)" --max-new 33 --timing 2>&1 >/dev/null | grep "^timing:") || true
          [ -n "$t" ] || { echo "  $kv T$T L$L: no timing"; continue; }
          pt=$(min_field prefill_s "$t" ""); dt=$(min_field decode_s "$t" "")
          awk -v kv=$kv -v T=$T -v L=$L -v pt=$pt -v dt=$dt -v m="$m" -v roof="$roofs" "$ROOF_AWK"'
            BEGIN {
              bw = f(roof, "bw_" T) * 1e9
              dec = 32 / dt; dlim = bw / (f(m, "weight_bytes") + kv_read(m, kv, L))
              pre = L / pt; plim = peak(roof, T) * 1e9 / (prefill_flops(m, L, 1) / L)   # the head for the last row only
              printf "  %-6s %2d %6d %10.1f %10.1f %6.0f%% %10.1f %10.1f %6.0f%%\n", kv, T, L, pre, plim, 100 * pre / plim, dec, dlim, 100 * dec / dlim
            }'
        done
      done
    done
  done
  # attention alone (one layer, SmolLM2's shape: a 512-query prefill chunk and 32 decode steps at
  # the end of the context) against the same peak; f16, int8 and a 4-bit format
  for L in $depths; do
    [ "$L" -ge 1024 ] || continue
    for T in 1 2; do
      "$BUILD/bench/bench_attn" "$L" $T "$(awk -v roof="$roofs" -v T=$T "$ROOF_AWK"' BEGIN { print peak(roof, T) }')" int8,q4_0 |
        sed 's/^/  /'
    done
  done
}

# 7. a long run's cost (issue 25): a two-arm (f16, int8) 16-depth per-position sweep of Gemma 3 270M
#    to BENCH_LONG_DEPTH (default 32736: Gemma's 32,768-token context less the fork probe; 2048 with
#    BENCH_QUICK=1; BENCH_LONG=0 skips it), one worker
#    thread per arm on 2 cores, fork 32: its wall time against the sum of its parts at the roofline.
#    The parts, per arm: the prefill to the deepest depth with every position's logit row (per-position
#    mode: the output head for each) at the FMA peak, and the 16 x 32 fork tokens' decode steps (the
#    weights and the KV a token reads at its depth) at the read bandwidth; the two arms' work is summed
#    against the 2-thread limits. The driver's comparison of the rows is not a part (bench_compare
#    measures it alone). BENCH_LONG_ONLY=1 runs this section alone.
long_run() {
  local depth=${BENCH_LONG_DEPTH:-32736} gemma=$CACHE/gemma-3-270m-q4_k_m.gguf m t0 t1
  [ "${BENCH_QUICK:-0}" = 1 ] && depth=${BENCH_LONG_DEPTH:-2048}
  echo
  echo "== a long run: arms f16,int8 (1 thread each), Gemma 3 270M, 16 depths to $depth, every position, fork 32"
  [ -f "$gemma" ] || { echo "  (no $gemma: make models)"; return 0; }
  [ -s "$TMP/roof" ] || "$BUILD/bench/bench_roof" "$MODEL" 2 >"$TMP/roof"
  m=$("$BUILD/bench/bench_roof" "$gemma" 1 2>/dev/null | grep '^model' | head -1)
  corpus | "$W" --model "$gemma" --tokenize >"$TMP/gemma.ids" 2>/dev/null || true
  tr ' ' '\n' <"$TMP/gemma.ids" | awk -v n=$((depth + 64)) 'NF && k < n { print; k++ }' >"$TMP/gemma.col"   # (no head: pipefail)
  [ "$(wc -l <"$TMP/gemma.col")" -eq $((depth + 64)) ] || { echo "  (the corpus is shorter than $((depth + 64)) Gemma tokens)"; return 0; }
  tr '\n' ' ' <"$TMP/gemma.col" >"$TMP/gemma.long"
  t0=$(date +%s.%N)
  "$D" sweep --model "$gemma" --tokens-file "$TMP/gemma.long" --arms f16,int8 --depths 16 --max-depth "$depth" \
      --fork 32 --threads 1 --quiet --per-position --out "$TMP/long" >/dev/null || { echo "  the sweep failed"; return 0; }
  t1=$(date +%s.%N)
  awk -F'\t' 'NR > 1 && !seen[$1]++ { print $1 }' "$TMP/long/depths.tsv" >"$TMP/long.depths"
  awk -v wall="$(awk -v a="$t1" -v b="$t0" 'BEGIN { print a - b }')" -v m="$m" -v roof="$(grep '^roof' "$TMP/roof" | tr '\n' ' ')" \
      -v D="$depth" "$ROOF_AWK"'
    { dec_bytes += 32 * (f(m, "weight_bytes") + (kv_read(m, "f16", $1) + kv_read(m, "int8", $1)) / 2) }
    END {
      fl = 2 * prefill_flops(m, D, D); by = 2 * dec_bytes
      tp = fl / (peak(roof, 2) * 1e9); td = by / (f(roof, "bw_2") * 1e9)
      printf "  wall %.0f s; the parts at the roofline: prefills %.3g flops (%.0f s at %.0f GFLOP/s), fork decode %.3g bytes (%.1f s at %.1f GB/s): %.0f s; wall / roofline sum %.1fx\n", wall, fl, tp, peak(roof, 2), by, td, f(roof, "bw_2"), tp + td, wall / (tp + td)
    }' "$TMP/long.depths"
}
[ "${BENCH_ROOF_ONLY:-0}" = 1 ] && { roofline; exit 0; }
[ "${BENCH_LONG_ONLY:-0}" = 1 ] && { long_run; exit 0; }

# ISA=avx2: the native table first, then the AVX2 one (strata -march=haswell, llama.cpp with its
# native detection off and AVX2/FMA/F16C on), so any x86 machine measures the AVX2 ratio
if [ "${ISA:-}" = avx2 ]; then
  section1 native build tests/.venv "$(lcpp_cmake_isa)"
  section1 avx2 "$BUILD" tests/.venv-avx2 "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF"
elif [ -n "${ISA:-}" ]; then
  echo "(ISA=$ISA: no llama.cpp build for it; strata's figures only)"
  BENCH_QUICK=1 section1 "$ISA" "$BUILD" "" ""
else
  section1 native "$BUILD" tests/.venv "$(lcpp_cmake_isa)"
fi

# BENCH_RATIOS_ONLY=1: section 1 only (the strata / llama.cpp tables)
[ "${BENCH_RATIOS_ONLY:-0}" = 1 ] && exit 0
roofline

# 2. attention alone
echo
echo "== attention at 8K context, SmolLM2 shape, every KV format (tests/bench/bench_attn.c)"
"$BUILD/bench/bench_attn" 8192 2

# 3 and 4. the sweep: overhead and per-position streaming
DEPTH=2048; [ "${BENCH_QUICK:-0}" = 1 ] && DEPTH=1024
echo
echo "== sweep overhead: arms f16,int8 (1 thread each), 16 depths to $DEPTH, fork 32"
t0=$(date +%s.%N)
"$D" sweep --model "$MODEL" --tokens-file "$(ids $((DEPTH + 64)))" --arms f16,int8 --depths 16 --max-depth $DEPTH \
    --fork 32 --threads 1 --quiet --out "$TMP/sweep" >/dev/null
t1=$(date +%s.%N)
t=$("$W" --model "$MODEL" --kv int8 --threads 1 --tokens-file "$(ids $DEPTH)" --max-new 33 --timing 2>&1 >/dev/null | grep '^timing:')
pt=$(sed -E 's/.*prefill_s=([0-9.]+).*/\1/' <<<"$t"); dt=$(sed -E 's/.*decode_s=([0-9.]+).*/\1/' <<<"$t")
awk -v w="$(awk -v a=$t1 -v b=$t0 'BEGIN{print a-b}')" -v p=$pt -v d=$dt 'BEGIN{b=p+16*d; printf "  sweep wall %.1f s; one %d-token prefill %.1f s + 16 fork probes %.1f s = %.1f s; ratio %.2f (target <= 1.25)\n", w, '"$DEPTH"', p, 16*d, b, w/b}'
echo
echo "== per-position streaming: the same sweep with every row compared"
t0=$(date +%s.%N)
"$D" sweep --model "$MODEL" --tokens-file "$(ids $((DEPTH + 64)))" --arms f16,int8 --depths 16 --max-depth $DEPTH \
    --fork 1 --threads 1 --quiet --per-position --out "$TMP/pp" >/dev/null
t1=$(date +%s.%N)
awk -v w="$(awk -v a=$t1 -v b=$t0 'BEGIN{print a-b}')" -v n=$DEPTH 'BEGIN{rows=2*n; gb=rows*49152*4/1e9; printf "  %d rows of 49152 logits from 2 arms in %.1f s: %.0f rows/s, %.2f GB/s (engine time included)\n", rows, w, rows/w, gb/w}'
echo "  driver peak RSS: $(grep -o "\"driver_peak_rss\": *[0-9]*" "$TMP/pp/meta.json" || echo unknown)"
"$BUILD/bench/bench_compare"

# 5. weight types
echo
echo "== weight types: dequantise and fused decode dot, values/s (tests/bench/bench_quant.c)"
"$BUILD/bench/bench_quant"

# 6. endurance: one listening worker per arm serves sweep after sweep; its RSS after each
echo
echo "== endurance: two listening workers (f16, int8) serve sequential sweeps (tests/bench/endurance.sh)"
if [ "${BENCH_QUICK:-0}" = 1 ]; then SWEEPS=5 DEPTH=512 BUILD=$BUILD MODEL=$MODEL bash tests/bench/endurance.sh
else SWEEPS=20 DEPTH=1024 BUILD=$BUILD MODEL=$MODEL bash tests/bench/endurance.sh; fi

# 7. the long run (above), last
[ "${BENCH_LONG:-1}" = 0 ] || long_run
