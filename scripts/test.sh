#!/usr/bin/env bash
# The whole test suite on a fresh machine: provision what it needs, then lint, type-check, test.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k runner`); without any, the engine
# environments' tests run after the main suite (scripts/engine_envs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet 'uv>=0.5'
export UV_COMPILE_BYTECODE=1   # the machine sets PYTHONDONTWRITEBYTECODE; imports must stay fast
uv sync --frozen --all-extras --quiet
run() { uv run --frozen --no-sync "$@"; }
# uv compiles site-packages; our own packages are installed editable, so compile them too
run python -m compileall -q core integrations

# Backends: every scripts/provision/*.sh is sourced in order. Each installs and starts its
# backend idempotently and exports what the tests need to reach it (e.g. DOCKER_HOST). A script
# that fails stops the run: in CI a missing backend is a failure, never a skip.
for script in scripts/provision/*.sh; do
  [ -e "$script" ] || continue
  echo "== provision ${script#scripts/provision/}"
  # shellcheck disable=SC1090
  . "$script"
done

echo "== ruff"; run ruff check . && run ruff format --check .
echo "== mypy"; run mypy
echo "== pytest"; run pytest "$@"
# Then each engine's tests on the other ends of its supported range, one env per engine version
# (.venvs/<env>). Only for the whole suite: `bash scripts/test.sh -k foo` stays a targeted run.
if [ "$#" -eq 0 ]; then
  bash scripts/engine_envs.sh
fi
