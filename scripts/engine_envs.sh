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
# To keep the whole test command well inside CI's time, an env runs the subset of its engine's
# tests that covers what differs between engine versions (sync and deferred waits, the sensor,
# kill/on_kill, reattach, logs, templating, timeouts, blocks/resources): the Prefect and Dagster
# tests marked `engine_matrix`, and the Airflow tests listed in AIRFLOW_MATRIX below (to become
# a marker in those tests). The full engine suites run in the main env; ANYLAUNCH_ENGINE_FULL=1
# runs them in every env too.
#
#   bash scripts/engine_envs.sh                  # every env (scripts/test.sh runs this)
#   bash scripts/engine_envs.sh prefect-newest   # some of them
#   ANYLAUNCH_ENGINE_PYTEST="-x -k sensor" bash scripts/engine_envs.sh airflow-2-10
#
# Exits non-zero when any env fails to sync or has a failing test. Outside CI an env whose sync
# fails (e.g. offline) is reported and skipped; with CI=true nothing is ever skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_ENVS=(airflow-2-10 airflow-2-11 airflow-3-0 prefect-3-8 prefect-newest dagster-oldest hydra)
# What the test command runs: every env.
DEFAULT_ENVS=("${ALL_ENVS[@]}")
A=tests/integrations/airflow
AIRFLOW_MATRIX=(
  "$A/test_operator.py::test_a_failing_app_fails_the_task_with_its_message_and_last_lines"
  "$A/test_operator.py::test_deferred_run_streams_the_selected_replica_from_the_trigger"
  "$A/test_operator.py::test_templated_fields_are_rendered_and_typed"
  "$A/test_operator.py::test_jinja_inside_the_appdef_is_rendered"
  "$A/test_operator.py::test_killing_the_task_cancels_the_app_unless_told_to_keep_it"
  "$A/test_operator.py::test_one_record_per_line_and_no_secret_in_log_or_xcom"
  "$A/test_operator.py::test_run_timeout_cancels_the_app"
  "$A/test_sensor.py::test_sensor_waits_for_an_app_launched_upstream"
  "$A/test_retry.py::test_retry_after_a_crash_reattaches_to_the_running_app"
  "$A/test_trigger.py"
  "$A/test_examples.py"
  "$A/test_provider.py::test_providers_manager_knows_the_link_hook_and_connection_type"
  "$A/test_provider.py::test_hook_reads_the_connection"
  "$A/test_bad_input_airflow.py"
  "$A/test_lifecycle_matrix.py::test_airflow[success-sync]"
  "$A/test_lifecycle_matrix.py::test_airflow[success-deferred]"
  "$A/test_lifecycle_matrix.py::test_airflow[nonzero_exit-sync]"
  "$A/test_lifecycle_matrix.py::test_airflow[nonzero_exit-deferred]"
  "$A/test_lifecycle_matrix.py::test_airflow[deleted_underneath-deferred]"
)
if [ "$#" -gt 0 ]; then ENVS=("$@"); else ENVS=("${DEFAULT_ENVS[@]}"); fi
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
    hydra) engine=components dist=hydra-core ;; # utils.hydra (no Dagster there: see pyproject)
    *) echo "engine_envs: unknown env '$env'; choose from: ${ALL_ENVS[*]}" >&2; exit 2 ;;
  esac
  venv=".venvs/$env"
  log="$LOGS/$env.log"
  echo "== engine env $env ($venv; log $log)"
  t0=$SECONDS
  # the backend extras the engine tests use (utils.hydra's tests run on local_cwd alone)
  extras=(--extra kubernetes --extra docker --extra aws)
  [ "$engine" != components ] || extras=()
  if ! UV_PROJECT_ENVIRONMENT="$venv" uv sync --frozen --quiet --no-default-groups \
    --group dev --group "$env" "${extras[@]}" >"$log" 2>&1; then
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
  # one pytest run per selection (the marker would deselect the unmarked doctests)
  if [ -n "${ANYLAUNCH_ENGINE_FULL:-}" ]; then
    runs=("tests/integrations/$engine integrations/$engine")
  elif [ "$engine" = components ]; then
    runs=("tests/components/test_hydra.py core/anylaunch/components/utils.py")
  elif [ "$engine" = airflow ]; then
    runs=("${AIRFLOW_MATRIX[*]} integrations/$engine")
  else
    runs=("-m engine_matrix tests/integrations/$engine" "integrations/$engine")
  fi
  t1=$SECONDS
  rc=0
  : >"$log"
  closing=()
  for selection in "${runs[@]}"; do
    read -r -a sel <<<"$selection"
    start=$(wc -l <"$log")
    "$venv/bin/python" -m pytest -q --continue-on-collection-errors "${PYTEST_ARGS[@]}" \
      "${sel[@]}" >>"$log" 2>&1 || rc=$?
    # pytest's closing line of this run (an engine's thread may still print after it)
    closing+=("$(tail -n "+$((start + 1))" "$log" | grep -E ' in [0-9.]+s' | tail -n 1 || true)")
  done
  t_test=$((SECONDS - t1))
  tail -n 30 "$log"
  # pytest's closing lines, e.g. "3 failed, 120 passed, 2 skipped in 301.20s (0:05:01)", summed
  counts=$(printf '%s\n' "${closing[@]}" |
    grep -oE '[0-9]+ (passed|failed|errors?|skipped|xfailed|xpassed)' |
    awk '{k = ($2 == "error" ? "errors" : $2); n[k] += $1}
      END {for (k in n) printf "%s%d %s", (i++ ? ", " : ""), n[k], k}' || true)
  [ "$rc" -eq 0 ] || failed=1
  summary+=("$env: $dist $version, ${counts:-no tests ran} (exit $rc); sync ${t_sync}s, tests ${t_test}s")
done

echo "== engine envs"
printf '%s\n' "${summary[@]}"
exit "$failed"
