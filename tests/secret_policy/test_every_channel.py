"""One secret policy, every channel (issue 15): a secret env value, named by any built-in
pattern (TOKEN, SECRET, PASS, PWD, KEY, CREDENTIAL, AUTH), never appears in what a human or a
log sees from the core: every scheduler's dryrun (its printed form and the repr/str of its
native request), the AppDef/Role reprs, the errors about it. The app still gets the value.

The engines' channels (Airflow task log/XCom/trigger events, Prefect logs/artifacts/results,
Dagster event log/metadata/repr) and the CLI's are checked in their suites
(``tests/integrations/*``: ``secret`` tests; ``tests/cli/test_cli.py``)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import get_runner
from anylaunch.specs import AppDef, AppState, Resource, Role
from anylaunch.specs.errors import AnylaunchError
from tests.bad_input.test_schedulers import REQUIRED, SCHEDULERS

#: One env name per built-in secret pattern family.
SECRET_NAMES = (
    "HF_TOKEN",
    "CLIENT_SECRET",
    "DB_PASSWORD",
    "SMTP_PASS",
    "ADMIN_PWD",
    "AWS_SECRET_ACCESS_KEY",
    "GCP_CREDENTIALS",
    "BASIC_AUTH",
)


def _secrets() -> dict[str, str]:
    return {name: f"v-{uuid.uuid4().hex}" for name in SECRET_NAMES}


def _app(env: dict[str, str], image: str = "busybox:1.36") -> AppDef:
    role = Role("w", image, entrypoint="echo", args=["hi"], env=dict(env))
    role.resource = Resource(cpu=1, gpu=0, memMB=256)
    return AppDef("leaky", [role])


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_no_dryrun_form_holds_a_secret(scheduler: str) -> None:
    secrets = _secrets()
    with get_runner() as runner:
        info = runner.dryrun(_app(secrets), scheduler, cfg=dict(REQUIRED.get(scheduler, {})))
    shown = {
        "str(info)": str(info),
        "repr(info)": repr(info),
        "str(request)": str(info.request),
        "repr(request)": repr(info.request),
    }
    for where, text in shown.items():
        leaked = [name for name, value in secrets.items() if value in text]
        assert not leaked, f"{scheduler}: {where} shows {leaked}"


def test_appdef_and_role_reprs_mask_secret_values() -> None:
    secrets = _secrets()
    app = _app({**secrets, "PLAIN": "visible"})
    for text in (repr(app), str(app), repr(app.roles[0]), str(app.roles[0])):
        assert not [v for v in secrets.values() if v in text], text
        assert "visible" in text  # only secrets are masked
    assert app.roles[0].env == {**secrets, "PLAIN": "visible"}  # the data keeps the values


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_errors_about_a_secret_never_quote_it(scheduler: str) -> None:
    secrets = _secrets()
    bad = {**secrets, "HF_TOKEN": secrets["HF_TOKEN"] + "\x00"}
    with get_runner() as runner, pytest.raises(AnylaunchError) as raised:
        runner.dryrun(_app(bad), scheduler, cfg=dict(REQUIRED.get(scheduler, {})))
    assert secrets["HF_TOKEN"] not in str(raised.value)
    with get_runner() as runner, pytest.raises(AnylaunchError) as raised:
        cfg = {**REQUIRED.get(scheduler, {}), "passwrod": secrets["DB_PASSWORD"]}
        runner.dryrun(_app(secrets), scheduler, cfg=cfg)
    assert secrets["DB_PASSWORD"] not in str(raised.value)


def test_the_app_still_gets_every_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    secrets = _secrets()
    code = "import hashlib, os, sys; [print(n, os.environ[n]) for n in sys.argv[1:]]"
    app = AppDef(
        "gets",
        [Role("w", ".", entrypoint=sys.executable, args=["-c", code, *secrets], env=secrets)],
    )
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd")
        status = runner.wait(handle, wait_interval=0.2, timeout=120)
        assert status is not None and status.state == AppState.SUCCEEDED
        lines = list(runner.log_lines(handle, "w", 0))
    assert sorted(lines) == sorted(f"{n} {v}\n" for n, v in secrets.items())


def test_describe_masks_what_others_can_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """describe gives the AppDef back; its repr (what lands in logs) holds no secret."""
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(tmp_path / "state"))
    secrets = _secrets()
    app = AppDef("desc", [Role("w", ".", entrypoint="true", env=secrets)])
    with get_runner() as runner:
        handle = runner.run(app, "local_cwd")
        runner.wait(handle, wait_interval=0.2, timeout=120)
        described: Any = runner.describe(handle)
    assert described is not None
    assert not [v for v in secrets.values() if v in repr(described)]
