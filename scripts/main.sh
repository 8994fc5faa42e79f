#!/usr/bin/env bash
# Set up (if needed) and run the default end-to-end job on the built-in data:
# solve the example chains with every solver at several budgets, replay every schedule,
# write results/main/*.csv and a figure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m memsched.experiments.main_job "$@"
