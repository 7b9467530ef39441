"""What a job tracked and its archived record show in Airflow: the ``tracker`` and
``archive_url`` XComs (and the "anylaunch archive" link); a sensor on an app whose backend
forgot it reads its outcome and logs from the archive instead of failing it as lost."""

import asyncio
from pathlib import Path
from typing import Any, Callable, List

import pytest

from anylaunch.runner.archive import Archive
from tests.integrations.tracked_apps import archived_app, check_tracked, configure


@pytest.mark.parametrize("mode", ["sync", "deferred"])
def test_what_the_job_tracked_is_an_xcom(
    airflow: Any,
    afc: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    mode: str,
) -> None:
    _, archive = configure(monkeypatch, tmp_path)
    dagrun = airflow.run(airflow.test_dag("tracker_dags.py", f"al_tracked_{mode}"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    assert airflow.states(dagrun) == {"train": "success"}, out[-3000:]
    (app,) = apps()
    xcoms = airflow.xcoms(dagrun, "train")
    check_tracked(xcoms["tracker"], app.app_handle)
    url = xcoms["archive_url"]
    assert url == Archive(str(archive)).location(app.app_handle)
    assert Archive(str(archive)).has(app.app_handle)  # the link points at a complete record
    if afc.version >= (3, 0):  # Airflow 3 stores the links in XCom
        assert xcoms.get("_link_AnylaunchArchiveLink") == url


@pytest.mark.parametrize("mode", ["poke", "deferred"])
@pytest.mark.parametrize("succeed", [True, False], ids=["succeeded", "failed"])
def test_the_sensor_reads_an_archived_outcome(
    airflow: Any,
    state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    mode: str,
    succeed: bool,
) -> None:
    configure(monkeypatch, tmp_path)
    handle = archived_app(state_dir, succeed)
    monkeypatch.setenv("AL_ARCHIVED_HANDLE", handle)  # read when the DAG file is parsed
    dagrun = airflow.run(airflow.test_dag("tracker_dags.py", f"al_sensed_archived_{mode}"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    assert airflow.states(dagrun) == {"wait": "success" if succeed else "failed"}, out[-3000:]
    xcoms = airflow.xcoms(dagrun, "wait")
    assert xcoms["archive_url"].endswith(handle.split("://", 1)[1]), xcoms
    if succeed:
        assert xcoms["return_value"]["state"] == "SUCCEEDED"
        assert "from the archive" in xcoms["return_value"]["msg"]
    else:  # failed as the app did, not as lost
        assert "return_value" not in xcoms
        assert "ended FAILED" in out and "exit code 3 (from the archive at" in out, out[-3000:]


@pytest.mark.parametrize("succeed", [True, False], ids=["succeeded", "failed"])
def test_the_trigger_reads_an_archived_outcome_and_its_logs(
    state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, succeed: bool
) -> None:
    """What a deferred task or sensor waits with: the app's end and every line from the
    archive (as if a Job's TTL deleted it before the trigger saw it end)."""
    from airflow_anylaunch.triggers import AnylaunchAppTrigger

    configure(monkeypatch, tmp_path)
    handle = archived_app(state_dir, succeed)
    trigger = AnylaunchAppTrigger(handle, poll_interval=0.2)

    async def main() -> Any:
        return await asyncio.wait_for(trigger.run().__anext__(), 60)

    event = asyncio.run(main()).payload
    assert event["status"] == ("success" if succeed else "failed"), event
    assert event["app_status"]["state"] == ("SUCCEEDED" if succeed else "FAILED"), event
    assert "from the archive" in event["app_status"]["msg"], event
    assert event["log_tail"] == ["job/0 archived line"], event


@pytest.mark.parametrize("mode", ["poke", "deferred"])
def test_the_sensors_tracker_xcom_masks_the_apps_secrets(
    airflow: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    mode: str,
) -> None:
    """A job that tracks its own secret env value: the sensor (which did not launch it) masks
    it in the ``tracker`` XCom, whether it poked or deferred (the app still runs when the
    sensor starts, so the deferred one defers)."""
    import sys

    from anylaunch.runner import get_runner
    from anylaunch.specs import AppDef, Role

    configure(monkeypatch, tmp_path)
    secret = "tok-sensed-5f1e9a"
    script = (
        "import os, time\nfrom anylaunch.tracker import AppRun\ntime.sleep(4)\n"
        "AppRun.run_from_env().add_metadata(token=os.environ['API_TOKEN'], lr=0.1)\n"
    )
    role = Role("job", image=".", entrypoint=sys.executable, args=["-c", script])
    role.env["API_TOKEN"] = secret
    with get_runner() as runner:
        handle = runner.run(AppDef("tracks-secret", [role]), "local_cwd")
    monkeypatch.setenv("AL_TRACKED_HANDLE", handle)  # read when the DAG file is parsed
    dagrun = airflow.run(airflow.test_dag("tracker_dags.py", f"al_sensed_tracked_{mode}"))
    out = airflow.without_airflow_debug(capfd.readouterr().out)
    assert airflow.states(dagrun) == {"wait": "success"}, out[-3000:]
    if mode == "deferred":
        assert "deferr" in out.lower(), out[-3000:]
    tracked = airflow.xcoms(dagrun, "wait")["tracker"]
    assert tracked["metadata"] == {"token": "***", "lr": 0.1}, tracked
    assert secret not in out
