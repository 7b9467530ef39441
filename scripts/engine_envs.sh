#!/usr/bin/env bash
# Each engine's tests on the other ends of its supported range, one engine per environment.
#
# The main env (`uv sync --all-extras`) holds the newest Airflow and Dagster and the oldest
# supported Prefect; pyproject.toml's engine dependency groups hold the rest, each locked on its
# own in uv.lock (`[tool.uv] conflicts`). For every group this syncs `.venvs/<group>` with
# exactly the core, the kubernetes/docker/aws extras the backend tests use, the dev group and
# that one engine, then runs that engine's tests there (tests/integrations/<engine> and the
# doctests of integrations/<engine>; the core suite runs once, in the main env). One summary
# line per env: engine version, passed count, seconds.
#
#   bash scripts/engine_envs.sh                  # every env (scripts/test.sh runs this)
#   bash scripts/engine_envs.sh prefect-newest   # some of them
#   ANYLAUNCH_ENGINE_PYTEST="-x -k sensor" bash scripts/engine_envs.sh airflow-2-10
#
# Exits non-zero when any env fails to sync or has a failing test. Outside CI an env whose sync
# fails (e.g. offline) is reported and skipped; with CI=true nothing is ever skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_ENVS=(airflow-2-10 airflow-2-11 airflow-3-0 prefect-newest dagster-oldest)
if [ "$#" -gt 0 ]; then ENVS=("$@"); else ENVS=("${ALL_ENVS[@]}"); fi
in_ci() { case "${CI:-}" in 1 | true | TRUE | True | yes) return 0 ;; *) return 1 ;; esac; }
# extra pytest arguments for every env (word-split on purpose), e.g. "-x" or "-m engine_matrix"
read -r -a PYTEST_ARGS <<<"${ANYLAUNCH_ENGINE_PYTEST:-}"

command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet 'uv>=0.5'
export UV_COMPILE_BYTECODE=1
LOGS=.venvs/logs
mkdir -p "$LOGS"

summary=()
failed=0
for env in "${ENVS[@]}"; do
  case "$env" in
    airflow-*) engine=airflow dist=apache-airflow ;;
    prefect-*) engine=prefect dist=prefect ;;
    dagster-*) engine=dagster dist=dagster ;;
    *) echo "engine_envs: unknown env '$env'; choose from: ${ALL_ENVS[*]}" >&2; exit 2 ;;
  esac
  venv=".venvs/$env"
  log="$LOGS/$env.log"
  echo "== engine env $env ($venv; log $log)"
  t0=$SECONDS
  if ! UV_PROJECT_ENVIRONMENT="$venv" uv sync --frozen --quiet --no-default-groups \
    --group dev --group "$env" --extra kubernetes --extra docker --extra aws >"$log" 2>&1; then
    cat "$log" >&2
    if in_ci; then
      summary+=("$env: FAILED to sync (see above)")
      failed=1
    else
      summary+=("$env: skipped, sync failed (not in CI)")
    fi
    continue
  fi
  t_sync=$((SECONDS - t0))
  version=$("$venv/bin/python" -c "from importlib.metadata import version; print(version('$dist'))")
  t1=$SECONDS
  rc=0
  "$venv/bin/python" -m pytest -q --continue-on-collection-errors "${PYTEST_ARGS[@]}" \
    "tests/integrations/$engine" \
    "integrations/$engine" >"$log" 2>&1 || rc=$?
  t_test=$((SECONDS - t1))
  tail -n 30 "$log"
  # pytest's closing line, e.g. "3 failed, 120 passed, 2 skipped in 301.20s (0:05:01)"
  counts=$(tail -n 1 "$log" | grep -oE '[0-9]+ (passed|failed|errors?|skipped|xfailed|xpassed)' |
    paste -sd, - | sed 's/,/, /g')
  [ "$rc" -eq 0 ] || failed=1
  summary+=("$env: $dist $version, ${counts:-no tests ran} (exit $rc); sync ${t_sync}s, tests ${t_test}s")
done

echo "== engine envs"
printf '%s\n' "${summary[@]}"
exit "$failed"
