#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: pytest (notebooks included) and ruff.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
