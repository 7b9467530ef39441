"""The scheduler contract, the same for all eight schedulers on their real backends: submit,
describe through the states in order, list, log_iter and its argument checks, cancel
(idempotent), delete, and an unknown app (describe is None, cancel/delete are no-ops)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from anylaunch.schedulers.api import DescribeAppResponse, Stream
from anylaunch.specs import AppState
from anylaunch.specs.errors import InvalidSpecError, UnknownAppException
from tests.schedulers.contract.kits import GREETING, ROLE, SCHEDULERS, Kit

#: A safety net for waits on a loaded machine, never a timing assertion.
DEADLINE_S = 240.0
# lifecycle order: a later observation never goes back to an earlier rank
_RANK = {
    AppState.UNSUBMITTED: 0,
    AppState.SUBMITTED: 1,
    AppState.PENDING: 1,
    AppState.RUNNING: 2,
    AppState.SUCCEEDED: 3,
    AppState.FAILED: 3,
    AppState.CANCELLED: 3,
}


def _submit(kit: Kit, script: str) -> str:
    info = kit.scheduler.submit_dryrun(kit.app(script), kit.cfg)
    return kit.scheduler.schedule(info)


def _watch(kit: Kit, app_id: str, until: frozenset[AppState]) -> list[DescribeAppResponse]:
    """Describes the app until its state is in ``until``; returns every description."""
    seen: list[DescribeAppResponse] = []
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        desc = kit.scheduler.describe(app_id)
        assert desc is not None, f"{kit.name} lost app {app_id} while it ran"
        seen.append(desc)
        if desc.state in until:
            return seen
        time.sleep(0.2)
    raise AssertionError(f"{kit.name} app {app_id} never reached {until}: {seen[-1].state}")


def _assert_in_order(states: list[AppState]) -> None:
    ranks = [_RANK[s] for s in states if s != AppState.UNKNOWN]
    assert ranks == sorted(ranks), f"states went backwards: {[s.name for s in states]}"


TERMINAL = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})


def test_an_app_runs_to_success_and_is_listed_logged_and_deleted(kit: Kit) -> None:
    app_id = _submit(kit, f"echo '{GREETING}'")
    if kit.drive is not None:  # no controller: move the app on as it would
        kit.drive(app_id, "Running")
        kit.drive(app_id, "Completed")
    seen = _watch(kit, app_id, TERMINAL)
    _assert_in_order([d.state for d in seen])
    final = seen[-1]
    assert final.state == AppState.SUCCEEDED, final.msg
    assert final.app_id == app_id
    assert [rs.role for rs in final.roles_statuses] == [ROLE]

    listed = {a.app_id: a for a in kit.scheduler.list(kit.cfg)}
    assert app_id in listed
    assert listed[app_id].app_handle == (f"{kit.name}://{kit.scheduler.session_name}/{app_id}")
    if kit.logs:
        text = "".join(kit.scheduler.log_iter(app_id, ROLE, 0, should_tail=True))
        assert GREETING in text
        assert list(kit.scheduler.log_iter(app_id, ROLE, 0, regex="^nothing-matches$")) == []

    kit.scheduler.cancel(app_id)  # a finished app: a no-op
    after = kit.scheduler.describe(app_id)
    assert after is not None and after.state == AppState.SUCCEEDED
    kit.scheduler.delete(app_id)
    if kit.delete_forgets:
        assert kit.scheduler.describe(app_id) is None
        assert not kit.scheduler.exists(app_id)


def test_log_iter_checks_its_arguments_the_same_way(kit: Kit) -> None:
    app_id = _submit(kit, "true")
    sched = kit.scheduler
    with pytest.raises(InvalidSpecError, match=f"Did you mean '{ROLE}'") as err:
        sched.log_iter(app_id, ROLE + "x", 0)
    assert err.value.field == "role_name"
    with pytest.raises(InvalidSpecError) as err:
        sched.log_iter(app_id, ROLE, 7)
    assert err.value.field == "k"
    with pytest.raises(InvalidSpecError) as err:
        sched.log_iter(app_id, ROLE, 0, regex="(unclosed")
    assert err.value.field == "regex"
    with pytest.raises(InvalidSpecError) as err:
        now = datetime.now()
        sched.log_iter(app_id, ROLE, 0, since=now, until=now - timedelta(hours=1))
    assert err.value.field == "until"
    with pytest.raises(InvalidSpecError) as err:
        sched.log_iter(app_id, ROLE, 0, streams="bogus")  # type: ignore[arg-type]
    assert err.value.field == "streams"
    for stream in (Stream.STDOUT, Stream.STDERR):
        if stream not in kit.streams:  # a backend with one interleaved log says so
            with pytest.raises(InvalidSpecError, match="keeps only") as err:
                sched.log_iter(app_id, ROLE, 0, streams=stream)
            assert err.value.field == "streams"


def test_an_unknown_app_is_none_and_cancel_and_delete_are_no_ops(kit: Kit) -> None:
    real = _submit(kit, "true")
    unknown = kit.unknown(real)
    assert unknown != real
    assert kit.scheduler.describe(unknown) is None
    assert not kit.scheduler.exists(unknown)
    kit.scheduler.cancel(unknown)
    kit.scheduler.delete(unknown)
    with pytest.raises(UnknownAppException):
        kit.scheduler.log_iter(unknown, ROLE, 0)
    assert kit.scheduler.describe_many([real, unknown])[unknown] is None


RUNNING_KITS = tuple(s for s in SCHEDULERS if s != "aws_sagemaker")


@pytest.mark.parametrize("kit", RUNNING_KITS, indirect=True)
def test_cancel_ends_a_running_app_cancelled_and_is_idempotent(kit: Kit) -> None:
    app_id = _submit(kit, "echo started; sleep 600")
    if kit.drive is not None:
        kit.drive(app_id, "Running")
    _watch(kit, app_id, frozenset({AppState.RUNNING}))
    kit.scheduler.cancel(app_id)
    seen = _watch(kit, app_id, TERMINAL)
    assert seen[-1].state == AppState.CANCELLED, seen[-1].msg
    kit.scheduler.cancel(app_id)  # again: a no-op
    again = kit.scheduler.describe(app_id)
    assert again is not None and again.state == AppState.CANCELLED


FAILING_KITS = tuple(s for s in SCHEDULERS if s not in ("aws_sagemaker", "kubernetes_mcad"))


@pytest.mark.parametrize("kit", FAILING_KITS, indirect=True)
def test_a_non_zero_exit_ends_the_app_failed(kit: Kit) -> None:
    app_id = _submit(kit, "echo failing >&2; exit 3")
    seen = _watch(kit, app_id, TERMINAL)
    _assert_in_order([d.state for d in seen])
    assert seen[-1].state == AppState.FAILED, seen[-1].msg


def test_a_nul_byte_is_rejected_at_dryrun_and_a_secret_never_echoed(kit: Kit) -> None:
    app = kit.app("true")
    app.roles[0].env["API_TOKEN"] = "s3cr3t-" + chr(0) + "-value"
    with pytest.raises(InvalidSpecError) as err:
        kit.scheduler.submit_dryrun(app, kit.cfg)
    assert err.value.field == "Role[contract].env['API_TOKEN']"
    assert "s3cr3t" not in str(err.value)
    arg = kit.app("true")
    arg.roles[0].args.append("a" + chr(0) + "b")
    with pytest.raises(InvalidSpecError, match="NUL byte"):
        kit.scheduler.submit_dryrun(arg, kit.cfg)


#: What a shell, a job script or an API server could mangle: each must reach the app as is.
#: (``$$`` is left out: it is the macro syntax for a literal ``$``, as in TorchX.)
HOSTILE_ARGS = [
    "$(HOME)",
    "cost: $ 5",
    "$5 and `id`",
    'it\'s "quoted"',
    "semi;colon&&and|pipe>redirect",
    "--flag=$HOME",
    "back\\slash",
    "ünïcødé ✓",
    "-n",
    "  spaced  ",
    "*.py",
]
HOSTILE_ENV = "$(HOME) $X `id` 'q' \"dq\""


@pytest.mark.parametrize("kit", FAILING_KITS, indirect=True)
def test_hostile_args_and_env_values_arrive_byte_for_byte(kit: Kit) -> None:
    # each value between brackets: a log store may trim a line's own leading/trailing blanks
    app = kit.app('printf "[%s]\\n" "$@"; printf "env=[%s]\\n" "$HOSTILE"')
    role = app.roles[0]
    role.args += ["sh", *HOSTILE_ARGS]  # "sh" is $0 of the script
    role.env["HOSTILE"] = HOSTILE_ENV
    app_id = kit.scheduler.schedule(kit.scheduler.submit_dryrun(app, kit.cfg))
    seen = _watch(kit, app_id, TERMINAL)
    assert seen[-1].state == AppState.SUCCEEDED, seen[-1].msg
    lines = [line.rstrip("\n") for line in kit.scheduler.log_iter(app_id, ROLE, 0)]
    expected = [f"[{arg}]" for arg in HOSTILE_ARGS] + [f"env=[{HOSTILE_ENV}]"]
    assert lines[-len(expected) :] == expected
