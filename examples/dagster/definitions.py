"""anylaunch apps as Dagster ops and assets, on the local_cwd scheduler.

- job `hello_job`: an op that runs the built-in `utils.echo` component
- asset `trained_model`: runs train.py on two replicas; its materialization records the app's
  handle, final state, log URL and duration
- asset `model_report` (after `trained_model`): runs report.py through Dagster Pipes; the
  program reports its own metadata and an asset check back to Dagster

Run: uv run dagster dev -f examples/dagster/definitions.py   (then open the UI)
 or: uv run dagster job execute -f examples/dagster/definitions.py -j hello_job
 or: uv run dagster asset materialize -f examples/dagster/definitions.py --select '*'
"""

import os
import sys
import tempfile
from pathlib import Path

import dagster as dg

import anylaunch.specs as specs
from dagster_anylaunch import (
    AnylaunchResource,
    PipesAnylaunchClient,
    build_anylaunch_asset,
    build_anylaunch_op,
)

HERE = Path(__file__).resolve().parent
# where the stand-in training writes its "weights" (set MODEL_DIR to choose)
MODEL_DIR = Path(
    os.environ.get("MODEL_DIR", Path(tempfile.gettempdir()) / "anylaunch-dagster-example")
)

# local_cwd runs the replicas as local processes; the programs run with the interpreter
# running Dagster (it has dagster-pipes). For a container scheduler, set `scheduler`, its
# `cfg` and an `image` holding the programs.
anylaunch = AnylaunchResource(
    scheduler="local_cwd",
    poll_interval_s=1,
    run_timeout_s=600,
    env={"EPOCHS": "3"},
)

greet = build_anylaunch_op(
    "greet", component="utils.echo", component_args=["--msg", "hello from dagster"]
)


@dg.job(resource_defs={"anylaunch": anylaunch})
def hello_job() -> None:
    greet()


def train_app() -> specs.AppDef:
    role = specs.Role(
        name="trainer",
        image=str(HERE),
        entrypoint=sys.executable,
        args=[str(HERE / "train.py"), str(MODEL_DIR)],
        env={"REPLICA": specs.macros.replica_id},
        num_replicas=2,
    )
    return specs.AppDef(name="train", roles=[role])


trained_model = build_anylaunch_asset("trained_model", train_app(), group_name="ml")


@dg.asset(
    deps=[trained_model],
    group_name="ml",
    kinds={"anylaunch"},
    check_specs=[dg.AssetCheckSpec("accuracy_above_threshold", asset="model_report")],
)
def model_report(
    context: dg.AssetExecutionContext, pipes_anylaunch: PipesAnylaunchClient
) -> dg.MaterializeResult:
    """Evaluates the model in an anylaunch app that reports back through Dagster Pipes."""
    role = specs.Role(
        name="evaluator",
        image=str(HERE),
        entrypoint=sys.executable,
        args=[str(HERE / "report.py"), str(MODEL_DIR)],
    )
    app = specs.AppDef(name="report", roles=[role])
    invocation = pipes_anylaunch.run(context=context, app=app, extras={"accuracy_threshold": 0.9})
    return invocation.get_materialize_result()


defs = dg.Definitions(
    assets=[trained_model, model_report],
    jobs=[
        hello_job,
        dg.define_asset_job("train_and_report", selection=[trained_model, model_report]),
    ],
    resources={
        "anylaunch": anylaunch,
        "pipes_anylaunch": PipesAnylaunchClient(anylaunch),
    },
)
