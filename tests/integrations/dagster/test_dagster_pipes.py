"""PipesAnylaunchClient on real in-process Dagster with real local_cwd apps: code inside the
app reports a materialization, metadata and logs back with dagster_pipes.open_dagster_pipes."""

import sys
from pathlib import Path
from typing import Dict, Optional

import dagster as dg
import pytest

from anylaunch.specs import AppDef, AppState, InvalidSpecError, Role
from dagster_anylaunch import AnylaunchResource, PipesAnylaunchClient

REPORTING_APP = """\
import os, sys
from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as pipes:
    rows = pipes.get_extra("rows")
    pipes.log.info(f"hello from inside replica {os.environ['RANK']}")
    print("a plain stdout line", flush=True)
    with open(sys.argv[1], "w") as f:
        f.write(os.environ.get("API_TOKEN", ""))
    pipes.report_asset_materialization(
        metadata={"rows": {"raw_value": rows, "type": "int"}, "asset": pipes.asset_key},
        data_version="v1",
    )
"""


# also run in each engine version's own environment (scripts/engine_envs.sh)
pytestmark = pytest.mark.engine_matrix


def pipes_app(out: Path, code: str = REPORTING_APP, env: Optional[Dict[str, str]] = None) -> AppDef:
    role = Role(
        "main",
        image=".",
        entrypoint=sys.executable,  # this interpreter has dagster-pipes
        args=["-c", code, str(out)],
        env={"RANK": "0", **(env or {})},
    )
    return AppDef("pipes-job", [role])


def test_the_app_reports_a_materialization_through_pipes(
    tmp_path: Path,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
    launched_apps,
    user_logs,
) -> None:
    monkeypatch.setenv("TEST_PIPES_TOKEN", "pipes-secret-value")
    out = tmp_path / "token"

    @dg.asset
    def table(
        context: dg.AssetExecutionContext, pipes_anylaunch: PipesAnylaunchClient
    ) -> dg.MaterializeResult:
        invocation = pipes_anylaunch.run(context=context, app=pipes_app(out), extras={"rows": 42})
        return invocation.get_materialize_result()

    # EnvVar fields of the wrapped resource are resolved at launch
    client = PipesAnylaunchClient(
        AnylaunchResource(
            poll_interval_s=0.2, secret_env={"API_TOKEN": dg.EnvVar("TEST_PIPES_TOKEN")}
        )
    )
    result = dg.materialize([table], resources={"pipes_anylaunch": client}, instance=instance)

    assert result.success
    (app,) = launched_apps()
    assert app.state == AppState.SUCCEEDED
    (materialization,) = result.asset_materializations_for_node("table")
    metadata = materialization.metadata
    assert metadata["rows"].value == 42  # reported from inside the app
    assert metadata["asset"].value == "table"
    assert metadata["handle"].value == app.app_handle  # added by the client
    assert isinstance(metadata["ui_url"], dg.UrlMetadataValue)
    assert materialization.tags is not None
    assert materialization.tags.get("dagster/data_version") == "v1"
    logs = user_logs(instance, result.run_id)
    assert "hello from inside replica 0" in logs  # a Pipes log message
    assert "main/0 a plain stdout line" in logs  # the app's own output, streamed
    assert out.read_text() == "pipes-secret-value"
    assert not any("pipes-secret-value" in m for m in logs)


def test_pipes_in_an_op_and_a_failing_app(
    tmp_path: Path, instance: dg.DagsterInstance, launched_apps
) -> None:
    failing = "import sys\nfrom dagster_pipes import open_dagster_pipes\nwith open_dagster_pipes() as pipes:\n    pipes.log.info('giving up')\nsys.exit(4)\n"

    @dg.op
    def fragile(context: dg.OpExecutionContext, pipes_anylaunch: PipesAnylaunchClient) -> None:
        pipes_anylaunch.run(context=context, app=pipes_app(tmp_path / "x", code=failing))

    @dg.job(
        resource_defs={
            "pipes_anylaunch": PipesAnylaunchClient(AnylaunchResource(poll_interval_s=0.2))
        }
    )
    def fragile_job() -> None:
        fragile()

    result = fragile_job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    (app,) = launched_apps()
    assert app.state == AppState.FAILED
    failure = result.failure_data_for_node("fragile")
    assert failure is not None and failure.user_failure_data is not None
    assert failure.user_failure_data.metadata["handle"].value == app.app_handle


def test_the_pipes_client_rejects_what_is_not_a_resource_or_reader() -> None:
    with pytest.raises(InvalidSpecError, match=r"^anylaunch="):
        PipesAnylaunchClient(anylaunch="local_cwd")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match=r"^message_reader="):
        PipesAnylaunchClient(message_reader=dg.PipesEnvContextInjector())  # type: ignore[arg-type]
