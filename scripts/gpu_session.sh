#!/usr/bin/env bash
# The checks to run on a CUDA machine, in one go, from the repository root:
#     bash scripts/gpu_session.sh OUTDIR
# 1. the tests that take CUDA when it is there (trainers, offloading's side stream, the small check);
# 2. the full accuracy check, python -m memsched.experiments.gpu_check (ResNet-50, GPT-2, Siamese, CLIP at
#    paper sizes), written to OUTDIR/gpu_check.json after each (model, problem), so a run cut short
#    keeps what it finished; copy it to results/gpu_check.json;
# 3. the other executor tests (tests/test_models_*.py), spread over the cores (pytest-xdist);
# 4. every other test file that uses torch (they default to CUDA where a test names no device).
# Each step has its own time limit (seconds: GPU_SESSION_LIMITS="tests check models others"). On a machine
# without network, memsched's missing dependencies travel as wheels in .whl/ (installed to /tmp/site)
# and memsched is installed editable without build isolation; Python runs with -P so that the
# checkout's folders are imported through that install.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-/tmp/gpu_session}"
mkdir -p "$OUT"
read -r LIMIT_TESTS LIMIT_CHECK LIMIT_MODELS LIMIT_OTHERS <<< "${GPU_SESSION_LIMITS:-120 240 90 150}"
export PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        > "$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -m pip install -q --no-index --no-deps --no-build-isolation -e . >> "$OUT/install.log" 2>&1; then
    # no editable install (an old setuptools): the package's folders as pyproject.toml maps them, linked
    echo "gpu_session: editable install failed (install.log); linking the folders instead"
    rm -rf /tmp/memsched_src && mkdir -p /tmp/memsched_src/memsched
    ln -s "$PWD"/memsched/* /tmp/memsched_src/memsched/
    for part in solvers models experiments; do ln -s "$PWD/$part" "/tmp/memsched_src/memsched/$part"; done
    export PYTHONPATH=/tmp/memsched_src${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi -L
"$PY" -P -c "import torch, memsched.solvers, ortools; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
      torch.cuda.get_device_name() if torch.cuda.is_available() else '')"
status=0
step() {  # step NAME LIMIT COMMAND...: run with a time limit, log to OUTDIR/NAME.log, remember a failure
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log" | tail -n 25
    local rc=${PIPESTATUS[0]}
    echo "== $name: rc $rc in $((SECONDS - t0)) s"
    [ "$rc" -eq 0 ] || status=1
}
CUDA_TESTS=(tests/test_models_devices.py tests/test_models_offload.py::test_cuda_side_stream_offloading
            tests/test_models_gpu_check.py::test_gpu_check_on_cuda_small tests/test_models_bad_input.py)
step tests "$LIMIT_TESTS" "$PY" -P -m pytest -q -p no:cacheprovider "${CUDA_TESTS[@]}"
step check "$LIMIT_CHECK" "$PY" -P -m memsched.experiments.gpu_check --out "$OUT/gpu_check.json"
deselect=()
for t in "${CUDA_TESTS[@]}"; do deselect+=(--deselect "$t"); done
step models "$LIMIT_MODELS" "$PY" -P -m pytest -q -p no:cacheprovider -n 12 "${deselect[@]}" tests/test_models_*.py
mapfile -t others < <(grep -l torch tests/test_*.py | grep -v "tests/test_models_")
step others "$LIMIT_OTHERS" "$PY" -P -m pytest -q -p no:cacheprovider -n 14 "${others[@]}"
exit "$status"
