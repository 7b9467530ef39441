"""TorchX HEAD's runner surface: ``Runner.run(..., dryrun=True)`` and ``get_runner``'s
scheduler keywords, on real local_cwd processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import ENV_ANYLAUNCH_SESSION, get_runner
from anylaunch.runner.placement import Placement, Target
from anylaunch.runner.scheduler_params import (
    TORCHX_SCHEDULER_PARAMS,
    check_scheduler_params,
    scheduler_params_of,
)
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.schedulers.local_scheduler import LocalScheduler
from anylaunch.specs import AppDef, AppDryRunInfo, AppState, Resource, Role
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException
from anylaunch.tracker.api import ENV_ANYLAUNCH_JOB_ID


def _echo_app(marker: Path) -> AppDef:
    return AppDef(
        "dry",
        roles=[
            Role(
                "worker",
                image=os.getcwd(),
                entrypoint="/bin/sh",
                args=["-c", f"touch {marker}"],
                resource=Resource(cpu=1, gpu=0, memMB=64),
            )
        ],
    )


@pytest.fixture
def local_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "local_state"
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(state))
    return state


# --- Runner.run(..., dryrun=True) ------------------------------------------------------------


def test_run_dryrun_renders_without_submitting_then_schedules(
    tmp_path: Path, local_state: Path
) -> None:
    marker = tmp_path / "ran"
    app = _echo_app(marker)
    with get_runner() as runner:
        before = {a.app_id for a in runner.list("local_cwd")}
        info = runner.run(app, "local_cwd", dryrun=True)
        assert isinstance(info, AppDryRunInfo)
        # nothing was launched: no new app, and the command never ran
        assert {a.app_id for a in runner.list("local_cwd")} == before
        assert not marker.exists()
        # the same request Runner.dryrun renders, on a patched copy: the caller's app is as built
        # each dryrun draws a fresh app id: compare the requests without it
        again = runner.dryrun(app, "local_cwd")
        assert info.request.app_id != again.request.app_id
        assert str(info).replace(info.request.app_id, "ID") == str(again).replace(
            again.request.app_id, "ID"
        )
        assert info.app is not None and info.app is not app
        assert info.app.roles[0].env[ENV_ANYLAUNCH_SESSION] == runner.session_name
        assert ENV_ANYLAUNCH_JOB_ID not in app.roles[0].env
        # the rendered request is submittable as it is
        handle = runner.schedule(info)
        final = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert final is not None and final.state == AppState.SUCCEEDED
        assert marker.exists()


def test_run_without_dryrun_still_returns_a_handle(tmp_path: Path, local_state: Path) -> None:
    with get_runner() as runner:
        handle = runner.run(_echo_app(tmp_path / "m"), "local_cwd", dryrun=False)
        assert isinstance(handle, str) and handle.startswith("local_cwd://anylaunch/")
        final = runner.wait(handle, wait_interval=0.2, timeout=60)
        assert final is not None and final.state == AppState.SUCCEEDED


def test_run_dryrun_is_keyword_only_and_a_bool(tmp_path: Path) -> None:
    app = _echo_app(tmp_path / "m")
    with get_runner() as runner:
        with pytest.raises(TypeError):
            runner.run(app, "local_cwd", None, None, None, True)  # type: ignore[misc]
        for bad in ("yes", 1, None):
            with pytest.raises(InvalidSpecError) as err:
                runner.run(app, "local_cwd", dryrun=bad)  # type: ignore[call-overload]
            assert err.value.field == "dryrun"


def test_run_dryrun_with_placement_says_to_dry_run_a_target(tmp_path: Path) -> None:
    with get_runner() as runner, pytest.raises(InvalidSpecError) as err:
        runner.run(
            _echo_app(tmp_path / "m"),
            placement=Placement([Target("local_cwd")]),
            dryrun=True,  # type: ignore[call-overload]
        )
    assert err.value.field == "dryrun" and "target" in err.value.fix
    assert not (tmp_path / "m").exists()


def test_run_dryrun_validates_like_dryrun(tmp_path: Path) -> None:
    with get_runner() as runner:
        with pytest.raises(InvalidSpecError) as err:
            runner.run("not an app", "local_cwd", dryrun=True)  # type: ignore[call-overload]
        assert err.value.field == "app"
        with pytest.raises(UnknownSchedulerException, match="Did you mean 'local_cwd'"):
            runner.run(_echo_app(tmp_path / "m"), "local_cwdd", dryrun=True)


# --- get_runner's scheduler keywords ---------------------------------------------------------


def test_get_runner_rejects_an_unknown_keyword_with_did_you_mean_and_hides_its_value() -> None:
    with pytest.raises(InvalidSpecError) as err:
        get_runner(kubconfig="/token-like-s3cr3t")
    message = str(err.value)
    assert err.value.field == "get_runner(kubconfig)"
    assert "Did you mean 'kubeconfig'?" in message
    assert "s3cr3t" not in message
    # the accepted keywords are listed with the schedulers that take them
    assert "kubeconfig (kubernetes, kubernetes_mcad)" in message
    assert "state_dir (local_cwd)" in message


@pytest.mark.parametrize("key", sorted(TORCHX_SCHEDULER_PARAMS))
def test_get_runner_accepts_every_keyword_torchx_schedulers_take(key: str) -> None:
    with get_runner(**{key: None}) as runner:
        assert "local_cwd" in runner.scheduler_backends()


def test_get_runner_keywords_reach_the_scheduler(tmp_path: Path) -> None:
    with get_runner(state_dir=str(tmp_path / "sd"), cache_size=10) as runner:
        sched = runner._scheduler("local_cwd")
        assert isinstance(sched, LocalScheduler)
        assert Path(sched._state_dir) == tmp_path / "sd"


def test_every_builtin_scheduler_declares_the_keywords_it_takes() -> None:
    for name, factory in get_scheduler_factories(skip_defaults=False).items():
        accepted = scheduler_params_of(factory)
        assert accepted is not None, name  # never "any keyword" for a built-in


def _plugin_with_named_keyword(session_name: str, *, region: str = "x") -> Any:
    raise AssertionError("never created by the check")


def _plugin_with_opaque_kwargs(session_name: str, **kwargs: Any) -> Any:
    raise AssertionError("never created by the check")


def test_plugin_factories_add_their_keywords_and_opaque_ones_disable_the_check() -> None:
    builtins = get_scheduler_factories()
    with_named = {**builtins, "mine": _plugin_with_named_keyword}
    check_scheduler_params({"region": "eu"}, with_named)
    with pytest.raises(InvalidSpecError, match="Did you mean 'region'"):
        check_scheduler_params({"regoin": "eu"}, with_named)
    # a factory taking undeclared **kwargs may read any keyword: nothing can be rejected
    check_scheduler_params({"anything": 1}, {**builtins, "opaque": _plugin_with_opaque_kwargs})
