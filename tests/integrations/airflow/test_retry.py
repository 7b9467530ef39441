"""Durable retries (ResumableJobMixin + task_state_store on Airflow 3.3, the app's task-instance
label before): a retry after a worker crash
reattaches to the running app; a new app is launched only if the previous one failed."""

from pathlib import Path
from typing import Any, Callable, List

import pytest


@pytest.mark.parametrize("dag_id", ["al_retry_reattach", "al_retry_reattach_deferred"])
def test_retry_after_a_crash_reattaches_to_the_running_app(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str], dag_id: str
) -> None:
    dagrun = airflow.run(airflow.test_dag("retry_dags.py", dag_id))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert str(tis["job"].state) == "success"
    assert tis["job"].try_number == 2  # the first try crashed
    assert "simulated worker crash while waiting for" in out
    launched = apps()
    assert len(launched) == 1, [a.app_handle for a in launched]  # exactly one app
    assert launched[0].state.name == "SUCCEEDED"
    assert "Reconnecting to existing job" in out
    result = airflow.xcoms(dagrun, "job")["return_value"]
    assert (result["app_handle"], result["state"]) == (launched[0].app_handle, "SUCCEEDED")


def test_retry_launches_again_only_after_the_app_failed(
    airflow: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AL_TEST_MARKER", str(tmp_path / "marker"))
    dagrun = airflow.run(airflow.test_dag("retry_dags.py", "al_retry_after_failure"))
    out = capfd.readouterr().out
    assert airflow.states(dagrun) == {"job": "success"}
    first, second = apps()
    assert (first.state.name, second.state.name) == ("FAILED", "SUCCEEDED")
    # Airflow 3.3 reads the failed app's handle from task_state_store; before, a retry looks
    # for a live app of its task instance and finds none
    assert (
        "Prior job in terminal state, resubmitting fresh" in out
        or "No live job of an earlier try found, submitting fresh" in out
    )
    assert "job/0 second launch works" in out


@pytest.mark.parametrize("suffix", ["", "_deferred"], ids=["sync", "deferred"])
def test_an_app_error_uses_no_retry_when_only_infrastructure_failures_retry(
    airflow: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    suffix: str,
) -> None:
    monkeypatch.setenv("AL_TEST_MARKER", str(tmp_path / "marker"))
    dagrun = airflow.run(
        airflow.test_dag("retry_dags.py", f"al_retry_infra_only_app_error{suffix}")
    )
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert str(tis["job"].state) == "failed"
    assert tis["job"].try_number == 1  # retries=2, none used: exit code 1 is the app's own
    assert "not retried: a application failure" in out
    assert [a.state.name for a in apps()] == ["FAILED"]


@pytest.mark.parametrize("suffix", ["", "_deferred"], ids=["sync", "deferred"])
def test_an_infrastructure_failure_is_retried_with_a_fresh_app(
    airflow: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    suffix: str,
) -> None:
    monkeypatch.setenv("AL_TEST_MARKER", str(tmp_path / "marker"))
    dagrun = airflow.run(airflow.test_dag("retry_dags.py", f"al_retry_infra_only_killed{suffix}"))
    tis = airflow.tis(dagrun)
    assert str(tis["job"].state) == "success"
    assert tis["job"].try_number == 2
    first, second = apps()
    assert (first.state.name, second.state.name) == ("FAILED", "SUCCEEDED")


def test_a_retry_never_adopts_an_app_whose_cancel_is_in_flight(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("retry_dags.py", "al_retry_after_cancel_in_flight"))
    capfd.readouterr()
    tis = airflow.tis(dagrun)
    assert str(tis["job"].state) == "success"
    assert tis["job"].try_number == 2
    first, second = apps()
    # the retry waited for the cancelled app to stop, then launched a fresh one
    assert (first.state.name, second.state.name) == ("CANCELLED", "SUCCEEDED")
