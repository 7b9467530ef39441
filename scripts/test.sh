#!/usr/bin/env bash
# The whole test suite on a fresh machine: provision what it needs, then lint, type-check, test.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k runner`).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet 'uv>=0.5'
export UV_COMPILE_BYTECODE=1   # the machine sets PYTHONDONTWRITEBYTECODE; imports must stay fast
uv sync --frozen --all-extras --quiet

run() { uv run --frozen --no-sync "$@"; }
echo "== ruff"; run ruff check . && run ruff format --check .
echo "== mypy"; run mypy
echo "== pytest"; run pytest "$@"
