#!/usr/bin/env bash
# build.sh — the pinned llama.cpp (libllama + ggml, static, CPU by default) for the llama backend
# (kernels/llama/backend_llama.c). Nothing of llama.cpp enters the source tree: the sdist, its
# sources and the build live in the cache.
#
#   bash kernels/llama/build.sh CACHE [EXTRA_CMAKE_FLAGS]
#   bash kernels/llama/build.sh --where CACHE [EXTRA_CMAKE_FLAGS]   the folder if it is built, else
#                                    nothing (fast: what `make` asks to decide whether to link it)
#   bash kernels/llama/build.sh --check DIR   DIR (LLAMA_DIR=) is an install of the pinned version:
#                                    include/llama.h as pinned (sha256) and lib/libllama.a
#
# Fetches llama-cpp-python 0.3.36's sdist from PyPI with pip (sha256 checked), unpacks its vendored
# llama.cpp (commit 0c1e57098), configures it with the instruction sets chosen below plus the
# extra flags, builds the `llama` target and installs it (include/, lib/) into
#   CACHE/llama-0c1e570-<hash>/      <hash>: the first 12 hex digits of sha256 of the CMake flags
# On success prints that folder as the last line of stdout; a second run finds it built (the
# stamp file .strata-built) and only prints it. Builds run under nice -n 19 with LLAMA_JOBS
# (default 2) jobs; the log is the folder's build.log.
set -euo pipefail

MODE=build
case "${1:-}" in --where|--check) MODE=${1#--}; shift;; esac
CACHE=${1:?usage: build.sh [--where|--check] CACHE|DIR [EXTRA_CMAKE_FLAGS]}
EXTRA=${2:-}
VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
COMMIT=0c1e570
JOBS=${LLAMA_JOBS:-2}
HEADER_SHA256=d5cf9203bea63b575e76cba4881f29cfd1b611451578b01582b75b72ecbb04bc   # its include/llama.h

if [ "$MODE" = check ]; then
  DIR=$CACHE
  [ -f "$DIR/include/llama.h" ] || { echo "error: LLAMA_DIR=$DIR has no include/llama.h (give an install prefix of llama.cpp $COMMIT)" >&2; exit 1; }
  echo "$HEADER_SHA256  $DIR/include/llama.h" | sha256sum -c --status \
    || { echo "error: LLAMA_DIR=$DIR: include/llama.h is not llama.cpp $COMMIT's (llama-cpp-python $VERSION): the backend is written for that version" >&2; exit 1; }
  ls "$DIR"/lib*/libllama.a >/dev/null 2>&1 || { echo "error: LLAMA_DIR=$DIR has no lib/libllama.a (a static build: BUILD_SHARED_LIBS=OFF)" >&2; exit 1; }
  echo "$DIR"
  exit 0
fi

# Instruction sets: no native detection (a native build picked AMX kernels that died with SIGILL
# on a machine that lists AMX but cannot run it); AVX2/FMA/F16C on (the floor strata assumes for
# x86-64 speed), AVX-512 on only when /proc/cpuinfo lists the parts ggml uses; AMX off (pass
# -DGGML_AMX_TILE=ON ... in EXTRA to ask for it). Other machines (aarch64) get ggml's defaults.
isa=""
if [ "$(uname -m)" = x86_64 ]; then
  isa="-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  has() { [[ " $flags " == *" $1 "* ]]; }
  if has avx512f && has avx512bw && has avx512vl && has avx512dq; then
    isa="$isa -DGGML_AVX512=ON"
    has avx512_vnni && isa="$isa -DGGML_AVX512_VNNI=ON"
    has avx512_bf16 && isa="$isa -DGGML_AVX512_BF16=ON"
    has avx512vbmi && isa="$isa -DGGML_AVX512_VBMI=ON"
  else
    isa="$isa -DGGML_AVX512=OFF"
  fi
  isa="$isa -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
fi
# OpenMP off: ggml's own thread pool, so the worker links no libgomp (and the thread count is the
# one the backend sets per context)
CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
-DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON $isa $EXTRA"
HASH=$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
OUT="$CACHE/llama-$COMMIT-$HASH"

if [ -f "$OUT/.strata-built" ]; then echo "$OUT"; exit 0; fi
[ "$MODE" = where ] && exit 0
command -v cmake >/dev/null || { echo "error: cmake is needed to build llama.cpp (apt-get install cmake)" >&2; exit 1; }
command -v g++ >/dev/null || { echo "error: g++ is needed to build llama.cpp (apt-get install g++)" >&2; exit 1; }
mkdir -p "$OUT"
exec 9>"$OUT.lock"
flock 9                                   # one build of a folder at a time
if [ -f "$OUT/.strata-built" ]; then echo "$OUT"; exit 0; fi

# the sdist, checked (pip's own client; a file already there is checked again)
DL="$CACHE/dl"
mkdir -p "$DL"
if [ ! -f "$DL/$SDIST" ] || ! echo "$SHA256  $DL/$SDIST" | sha256sum -c --status; then
  rm -f "$DL/$SDIST"
  echo "fetching $SDIST from PyPI" >&2
  # without build isolation first (no build backend fetched); where pip then lacks scikit-build-core
  # to read the sdist's metadata, again with isolation; the first try's traceback only if both fail
  python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation "llama-cpp-python==$VERSION" -d "$DL" \
      > "$DL/pip-first.log" 2>&1 \
    || python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$DL" >&2 \
    || { tail -n 5 "$DL/pip-first.log" >&2; echo "error: could not download $SDIST from PyPI" >&2; exit 1; }
fi
echo "$SHA256  $DL/$SDIST" | sha256sum -c --status \
  || { echo "error: $DL/$SDIST: sha256 is not $SHA256" >&2; rm -f "$DL/$SDIST"; exit 1; }

SRC="$OUT/src"
if [ ! -f "$SRC/include/llama.h" ]; then
  rm -rf "$SRC" "$OUT/unpack"
  mkdir -p "$OUT/unpack"
  tar -xzf "$DL/$SDIST" -C "$OUT/unpack" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  mv "$OUT/unpack/llama_cpp_python-$VERSION/vendor/llama.cpp" "$SRC"
  rm -rf "$OUT/unpack"
fi

echo "building llama.cpp $COMMIT into $OUT (nice -n 19, $JOBS jobs; log: $OUT/build.log; 10-25 minutes on 2 cores)" >&2
{
  echo "flags: $CMAKE_FLAGS"
  # shellcheck disable=SC2086
  nice -n 19 cmake -S "$SRC" -B "$OUT/build" $CMAKE_FLAGS -DCMAKE_INSTALL_PREFIX="$OUT" &&
  nice -n 19 cmake --build "$OUT/build" --target llama -j "$JOBS" &&
  nice -n 19 cmake --install "$OUT/build"
} >>"$OUT/build.log" 2>&1 || { echo "error: the llama.cpp build failed; the end of $OUT/build.log:" >&2; tail -n 20 "$OUT/build.log" >&2; exit 1; }
[ -f "$OUT/include/llama.h" ] && ls "$OUT"/lib*/libllama.a >/dev/null 2>&1 \
  || { echo "error: the llama.cpp install in $OUT has no include/llama.h or lib/libllama.a" >&2; exit 1; }
printf 'llama.cpp %s (llama-cpp-python %s)\nflags: %s\n' "$COMMIT" "$VERSION" "$CMAKE_FLAGS" > "$OUT/.strata-built"
echo "$OUT"
