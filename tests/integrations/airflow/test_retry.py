"""Durable retries: a retry after a worker crash reattaches to the running app (its handle kept
in task_state_store on Airflow 3.3; before, the app found again by its task-instance label);
a new app is launched only if the previous one failed."""

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


def test_a_try_after_a_clear_cancels_the_app_it_finds_and_launches_a_fresh_one(
    airflow: Any,
    apps: Callable[[], List[Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    afc: Any,
) -> None:
    """The app still runs and no cancel was requested (the old trigger's on_kill may come
    later): the task instance's generation in task_state_store says it predates a clear."""
    if afc.version < (3, 3):
        pytest.skip("the launch is recorded in task_state_store (Airflow >= 3.3)")
    monkeypatch.setenv("AL_TEST_MARKER", str(tmp_path / "marker"))
    dagrun = airflow.run(airflow.test_dag("retry_dags.py", "al_retry_after_a_clear"))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert (str(tis["job"].state), tis["job"].try_number) == ("success", 2)
    assert "launched before this task instance was cleared" in out
    assert "Reconnecting to existing job" not in out
    first, second = apps()
    assert (first.state.name, second.state.name) == ("CANCELLED", "SUCCEEDED")


def test_durable_false_never_reattaches(
    airflow: Any, apps: Callable[[], List[Any]], capfd: pytest.CaptureFixture[str]
) -> None:
    dagrun = airflow.run(airflow.test_dag("retry_dags.py", "al_retry_not_durable"))
    out = capfd.readouterr().out
    tis = airflow.tis(dagrun)
    assert (str(tis["job"].state), tis["job"].try_number) == ("success", 2)
    assert "Reconnecting to existing job" not in out
    launched = apps()
    assert len(launched) == 2, [a.app_handle for a in launched]  # the retry launched again
    from airflow_anylaunch._reattach import ENV_TASK_INSTANCE
    from anylaunch.runner import get_runner

    with get_runner() as runner:  # and no app carries the task instance's label
        for listed in launched:
            app = runner.describe(listed.app_handle)
            assert app is not None
            assert all(ENV_TASK_INSTANCE not in role.env for role in app.roles)


def test_before_3_3_the_app_carries_its_task_instance(
    airflow: Any, apps: Callable[[], List[Any]], afc: Any
) -> None:
    """The label a retry finds the app by (Airflow < 3.3): the task instance without its try
    number. Airflow 3.3 keeps the handle in task_state_store and adds no label."""
    from airflow_anylaunch._reattach import ENV_TASK_INSTANCE
    from anylaunch.runner import get_runner

    dagrun = airflow.run(airflow.test_dag("retry_dags.py", "al_retry_reattach"))
    (listed,) = apps()
    with get_runner() as runner:
        app = runner.describe(listed.app_handle)
    assert app is not None
    labels = {role.env.get(ENV_TASK_INSTANCE) for role in app.roles}
    if afc.version >= (3, 3):
        assert labels == {None}
    else:
        assert labels == {f"al_retry_reattach/{dagrun.run_id}/job/-1"}


def test_find_live_apps_returns_only_live_apps_with_the_label(state_dir: Path) -> None:
    import sys

    from anylaunch.runner import get_runner
    from anylaunch.runner.driver import cancel_and_wait
    from anylaunch.runner.rediscover import find_live_apps
    from anylaunch.specs import AppDef, Role
    from anylaunch.specs.errors import InvalidSpecError

    def app(label: str, script: str) -> AppDef:
        role = Role("job", image=".", entrypoint=sys.executable, args=["-c", script])
        role.env["AL_TEST_LABEL"] = label
        return AppDef("labelled", [role])

    with get_runner() as runner:
        done = runner.run(app("mine", "pass"), "local_cwd")
        runner.wait(done, wait_interval=0.1)
        mine = runner.run(app("mine", "import time; time.sleep(60)"), "local_cwd")
        other = runner.run(app("other", "import time; time.sleep(60)"), "local_cwd")
        try:
            assert find_live_apps(runner, "local_cwd", "AL_TEST_LABEL", "mine") == [mine]
            assert find_live_apps(runner, "local_cwd", "AL_TEST_LABEL", "nobody") == []
            with pytest.raises(InvalidSpecError, match="env_value"):
                find_live_apps(runner, "local_cwd", "AL_TEST_LABEL", "")
        finally:
            for handle in (mine, other):
                cancel_and_wait(runner, handle, 10)
