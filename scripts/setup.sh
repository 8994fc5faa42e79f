#!/usr/bin/env bash
# Set up memsched in ./.venv on a fresh machine (idempotent; seconds when already done).
#   - PyTorch: a CUDA build when an NVIDIA GPU is visible (nvidia-smi), else the CPU build
#     torch==2.13.0. Override with MEMSCHED_TORCH_SPEC, e.g.
#       MEMSCHED_TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu"
#     or MEMSCHED_TORCH_SPEC=none to skip torch (the solvers work without it).
#   - memsched itself, editable, with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
install() {  # pip install quietly; on failure show pip's output (without its index warnings)
    if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" > .venv/pip.log 2>&1; then
        grep -v "is ignored: it is neither" .venv/pip.log >&2
        echo "setup: pip install $* failed" >&2
        exit 1
    fi
}
if [ -z "${MEMSCHED_TORCH_SPEC:-}" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        MEMSCHED_TORCH_SPEC="torch>=2.3"          # PyPI's Linux wheels carry CUDA
    else
        MEMSCHED_TORCH_SPEC="torch==2.13.0"       # the CPU wheel where one is provided locally
    fi
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1 && [ "$MEMSCHED_TORCH_SPEC" != "none" ]; then
    # shellcheck disable=SC2086
    install $MEMSCHED_TORCH_SPEC
fi
install -e ".[test]"
.venv/bin/python -c "import memsched.solvers, memsched.experiments; print('memsched ready in .venv')"
