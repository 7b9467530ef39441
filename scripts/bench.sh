#!/usr/bin/env bash
# The benchmarks.
#
#   bash scripts/bench.sh [pytest-args]          the benchmarks in tests/benchmarks (speed of
#                                                anylaunch's own code, TorchX side by side), as
#                                                `pytest tests/benchmarks --benchmark-enable`
#   bash scripts/bench.sh slurm-arrays           a 1,000-index Slurm array against 1,000 separate
#                                                apps, each watched to the end (once through one
#                                                shared describe_many, once by a watcher per app:
#                                                squeue -j / sacct -j): submissions, slurmctld
#                                                RPCs (sdiag), slurmdbd RPCs, watcher CPU, wall time;
#                                                writes .benchmarks/slurm_arrays.json (the size:
#                                                ANYLAUNCH_SLURM_ARRAYS_N, default 1000)
#   bash scripts/bench.sh engine-scale [N ...]   the engine-scale benchmark (default N: 50 200 500):
#                                                N tasks of one engine waiting on real jobs at
#                                                once, anylaunch vs each engine's incumbent:
#                                                Airflow (deferred tasks; Kubernetes, Slurm,
#                                                local_cwd), Prefect (a mapped flow on a server
#                                                and worker; Kubernetes) and Dagster (one run's
#                                                op; Kubernetes); writes
#                                                .benchmarks/engine_scale.json and .png,
#                                                .benchmarks/engine_scale_prefect.json and
#                                                .benchmarks/engine_scale_dagster.json
#
# engine-scale provisions its backends like scripts/test.sh (every scripts/provision/*.sh is
# sourced) and installs the project with the `bench` dependency group (the incumbents: the
# cncf.kubernetes provider, prefect-kubernetes, dagster-k8s; matplotlib) into an environment of
# its own, .venvs/bench, so the project environment stays the locked default meanwhile.
# Environment knobs: ANYLAUNCH_ENGINE_SCALE_ENGINES (the engines to run, default
# "airflow prefect dagster"), ANYLAUNCH_ENGINE_SCALE_SLEEP_S (how long each job runs, default
# 30), pytest's -k through ANYLAUNCH_ENGINE_SCALE_PYTEST_ARGS (e.g. "-k kubernetes"),
# ANYLAUNCH_ENGINE_SCALE_K8S_TOOLS (Airflow's Kubernetes waiters, default "anylaunch kpo").
set -euo pipefail
cd "$(dirname "$0")/.."

command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet 'uv>=0.5'
export UV_COMPILE_BYTECODE=1 # the machine sets PYTHONDONTWRITEBYTECODE; imports must stay fast
run() { uv run --frozen --no-sync "$@"; }

if [ "${1:-}" = slurm-arrays ]; then
  shift
  args=("$@")
  set --  # the provisioning script reads its mode from its arguments
  uv sync --frozen --all-extras --quiet
  # shellcheck disable=SC1091
  . scripts/provision/20-slurm.sh
  export ANYLAUNCH_SLURM_ARRAYS_BENCH=1
  exec uv run --frozen --no-sync pytest tests/benchmarks/test_slurm_arrays_bench.py \
    -p no:cacheprovider -s "${args[@]}"
fi

if [ "${1:-}" != engine-scale ]; then
  uv sync --frozen --all-extras --quiet
  exec uv run --frozen --no-sync pytest tests/benchmarks --benchmark-enable "$@"
fi

shift
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(50 200 500)
for n in "${sizes[@]}"; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
    echo "bench.sh engine-scale: N must be a positive whole number of tasks, not '$n'" >&2
    echo "usage: bash scripts/bench.sh engine-scale [N ...]   (e.g. 50 200 500)" >&2
    exit 2
  fi
done

engines=(${ANYLAUNCH_ENGINE_SCALE_ENGINES:-airflow prefect dagster})
tests=()
for engine in "${engines[@]}"; do
  case "$engine" in
    airflow) tests+=(tests/benchmarks/engine_scale/test_engine_scale.py) ;;
    prefect | dagster) tests+=("tests/benchmarks/engine_scale/test_engine_scale_$engine.py") ;;
    *)
      echo "bench.sh engine-scale: ANYLAUNCH_ENGINE_SCALE_ENGINES names airflow, prefect or" \
        "dagster, not '$engine'" >&2
      exit 2
      ;;
  esac
done

export UV_PROJECT_ENVIRONMENT="$PWD/.venvs/bench"
uv sync --frozen --all-extras --group bench --quiet
run python -m compileall -q core integrations

for script in scripts/provision/*.sh; do
  [ -e "$script" ] || continue
  echo "== provision ${script#scripts/provision/}"
  # shellcheck disable=SC1090
  . "$script"
done

echo "== engine-scale N=${sizes[*]} engines=${engines[*]}"
export ANYLAUNCH_ENGINE_SCALE=1 ANYLAUNCH_ENGINE_SCALE_N="${sizes[*]}"
# shellcheck disable=SC2086 # the extra pytest arguments are words on purpose
run pytest "${tests[@]}" -p no:cacheprovider -s -v ${ANYLAUNCH_ENGINE_SCALE_PYTEST_ARGS:-}
echo "== results: .benchmarks/engine_scale{,_prefect,_dagster}.json, .benchmarks/engine_scale.png"
run python -m tests.benchmarks.engine_scale.report
