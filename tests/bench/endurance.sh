#!/usr/bin/env bash
# Endurance (make bench, section 6): one listening worker per arm serves many sequential sweeps;
# prints the workers' resident memory after each sweep, so a leak shows as growth (issue: a worker
# must serve sweep after sweep with stable RSS). Nothing is asserted: figures only.
#   BUILD (default build), MODEL (default SmolLM2 Q4_1 in the cache), SWEEPS (default 20),
#   DEPTH (default 1024)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CACHE=${STRATA_CACHE:-$HOME/.cache/strata}
MODEL=${MODEL:-$CACHE/smollm2-135m-instruct-q4_1.gguf}
SWEEPS=${SWEEPS:-20}
DEPTH=${DEPTH:-1024}
W=$BUILD/strata-worker
D=$BUILD/strata-driver
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

# resident and peak memory of a process in MiB: "RSS HWM"
mem() { awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{printf "%.1f %.1f", r/1024, h/1024}' "/proc/$1/status"; }

# the document: the repository's sources (enough tokens for DEPTH + the fork)
cat worker/*.c driver/*.c driver/*/*.c kernels/*.c >"$TMP/doc.txt"

# one worker per arm, each listening on a free loopback port
declare -A URL
for kv in f16 int8; do
  "$W" --model "$MODEL" --kv $kv --threads 1 --max-context $((DEPTH + 64)) --listen tcp://127.0.0.1:0 \
      >"$TMP/$kv.out" 2>"$TMP/$kv.err" &
  PIDS+=($!)
  for _ in $(seq 100); do grep -q "listening" "$TMP/$kv.out" 2>/dev/null && break; sleep 0.1; done
  URL[$kv]=$(sed -n 's/.*listening \(.*\)/\1/p' "$TMP/$kv.out")
  [ -n "${URL[$kv]}" ] || { echo "  the $kv worker did not start:"; cat "$TMP/$kv.err"; exit 1; }
done
echo "  workers: f16 pid ${PIDS[0]} (${URL[f16]}), int8 pid ${PIDS[1]} (${URL[int8]}); $SWEEPS sweeps of 16 depths to $DEPTH, per position"
printf '  %5s %8s %14s %14s\n' sweep "wall s" "f16 RSS MiB" "int8 RSS MiB"
first=""; last=""
for i in $(seq "$SWEEPS"); do
  t0=$(date +%s.%N)
  "$D" sweep --model "$MODEL" --doc "$TMP/doc.txt" --arm f16="${URL[f16]}" --arm int8="${URL[int8]}" --ref f16 \
      --depths 16 --max-depth "$DEPTH" --fork 8 --per-position --quiet --out "$TMP/s$i" >/dev/null
  t1=$(date +%s.%N)
  a=$(mem "${PIDS[0]}"); b=$(mem "${PIDS[1]}")
  [ "$i" = "$((SWEEPS >= 3 ? 2 : 1))" ] && first="$a $b"   # after a warm-up sweep (the allocator's pools)
  last="$a $b"
  printf '  %5d %8.1f %14s %14s\n' "$i" "$(awk -v a="$t1" -v b="$t0" 'BEGIN{print a-b}')" "${a% *}" "${b% *}"
  rm -rf "$TMP/s$i"
done
awk -v f="$first" -v l="$last" -v n="$SWEEPS" 'BEGIN{split(f,x," "); split(l,y," "); s=(n>=3?2:1); k=(n>s?n-s:1);
  printf "  RSS after sweep %d -> %d: f16 %.1f -> %.1f MiB (%+.3f MiB/sweep), int8 %.1f -> %.1f MiB (%+.3f MiB/sweep); peak f16 %.1f, int8 %.1f MiB\n",
    s, n, x[1], y[1], (y[1]-x[1])/k, x[3], y[3], (y[3]-x[3])/k, y[2], y[4]}'
