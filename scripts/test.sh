#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite: ruff, mypy (solvers/, see [tool.mypy] in
# pyproject.toml) and pytest (notebooks included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
