"""AppStatus rendering as TorchX renders it: format(), repr(), to_json(), hostaddr and
AppStatusError."""

from __future__ import annotations

import json
import pickle
from datetime import datetime

import pytest
import yaml

from anylaunch.specs import (
    AppState,
    AppStatus,
    AppStatusError,
    ReplicaStatus,
    RoleStatus,
)
from anylaunch.specs.errors import AnylaunchError, InvalidSpecError
from anylaunch.specs.secrets import Redactor
from anylaunch.specs.status_format import parse_error_reply, wrap_error_message

TS = 1_700_000_000
WHEN = str(datetime.fromtimestamp(TS))  # TorchX shows the time of the error in local time

NESTED = json.dumps(
    {
        "message": {
            "message": "RuntimeError: boom",
            "errorCode": 3,
            "extraInfo": {"py_callstack": "Traceback ...", "timestamp": str(TS)},
        }
    }
)
FLAT = json.dumps({"message": "ValueError: bad input", "errorCode": 2, "timestamp": TS})
ANYLAUNCH = json.dumps(
    {"role": "ps", "replica_id": 0, "exit_code": 127, "message": "could not start: no such file"}
)


def two_roles() -> AppStatus:
    return AppStatus(
        AppState.FAILED,
        num_restarts=1,
        msg="worker/1 failed",
        ui_url="http://ui/app-1",
        roles=[
            RoleStatus(
                "worker",
                [  # out of order on purpose: format() lists replicas by id
                    ReplicaStatus(1, AppState.FAILED, "worker", "node-1", NESTED),
                    ReplicaStatus(0, AppState.SUCCEEDED, "worker", "node-0"),
                    ReplicaStatus(2, AppState.CANCELLED, "worker", "node-2"),
                ],
            ),
            RoleStatus("ps", [ReplicaStatus(0, AppState.FAILED, "ps", "node-3", FLAT)]),
        ],
    )


def test_format_is_torchx_layout() -> None:
    expected = (
        "AppStatus:\n"
        "    State: FAILED\n"
        "    Num Restarts: 1\n"
        "    Roles: \n"
        " *worker[0]:SUCCEEDED\n"
        "  worker[1]:FAILED (exitcode: 3)\n"
        f"        timestamp: {WHEN}\n"
        "        hostname: node-1\n"
        "        error_msg: RuntimeError: boom\n"
        "  worker[2]:CANCELLED (no reply file)\n"
        " *ps[0]:FAILED (exitcode: 2)\n"
        f"        timestamp: {WHEN}\n"
        "        hostname: node-3\n"
        "        error_msg: ValueError: bad input\n"
        "    Msg: worker/1 failed\n"
        "    Structured Error Msg: <NONE>\n"
        "    UI URL: http://ui/app-1\n"
        "    "
    )
    assert two_roles().format() == expected


def test_format_filters_roles_and_rejects_a_bare_string() -> None:
    status = two_roles()
    only_ps = status.format(filter_roles=["ps"])
    assert " *ps[0]:FAILED" in only_ps and "worker[" not in only_ps
    assert status.format(filter_roles=[]) == status.format()  # empty: every role
    assert status.format(filter_roles=("ps",)) == only_ps
    with pytest.raises(InvalidSpecError) as e:
        status.format(filter_roles="ps")  # type: ignore[arg-type]
    assert isinstance(e.value, ValueError)
    assert "filter_roles='ps'" in str(e.value) and "['ps']" in str(e.value)


@pytest.mark.parametrize(
    ("reply", "exitcode", "when", "message"),
    [
        (NESTED, "3", WHEN, "RuntimeError: boom"),
        (FLAT, "2", WHEN, "ValueError: bad input"),
        (ANYLAUNCH, "127", "<N/A>", "could not start: no such file"),
        (json.dumps({"message": {"message": "oom"}}), "<N/A>", "<N/A>", "oom"),
        (json.dumps({"message": "m", "errorCode": 0}), "0", "<N/A>", "m"),
        (json.dumps({"message": "m", "timestamp": "soon"}), "<N/A>", "<N/A>", "m"),
        (json.dumps({"message": "m", "timestamp": f"{TS}.5"}), "<N/A>", WHEN, "m"),
        ("pod evicted: node lost", "<N/A>", "<N/A>", "pod evicted: node lost"),
        ('{"exit_code": 4}', "4", "<N/A>", '{"exit_code": 4}'),
        ("[1, 2]", "<N/A>", "<N/A>", "[1, 2]"),
    ],
    ids=[
        "torchelastic-nested",
        "flat",
        "anylaunch-exit_code",
        "no-code-no-time",
        "exit-code-0",
        "bad-timestamp",
        "float-timestamp",
        "plain-text",
        "json-without-message",
        "json-not-an-object",
    ],
)
def test_every_reply_layout_reads(reply: str, exitcode: str, when: str, message: str) -> None:
    rep = ReplicaStatus(0, AppState.FAILED, "w", "node-0", reply)
    text = AppStatus(AppState.FAILED, roles=[RoleStatus("w", [rep])]).format()
    block = text.split("Roles: \n", 1)[1].split("\n    Msg:", 1)[0]
    assert block.splitlines() == [
        f" *w[0]:FAILED (exitcode: {exitcode})",
        f"        timestamp: {when}",
        "        hostname: node-0",
        f"        error_msg: {message}",
    ]


def test_missing_hostname_is_not_available() -> None:
    rep = ReplicaStatus(3, AppState.FAILED, "w", "", FLAT)
    assert (
        "        hostname: <N/A>\n"
        in AppStatus(AppState.FAILED, roles=[RoleStatus("w", [rep])]).format()
    )


def test_running_or_succeeded_replica_without_reply_has_no_note() -> None:
    roles = [
        RoleStatus(
            "w",
            [
                ReplicaStatus(0, AppState.RUNNING, "w", "h"),
                ReplicaStatus(1, AppState.PENDING, "w", "h"),
                ReplicaStatus(2, AppState.FAILED, "w", "h"),
            ],
        )
    ]
    lines = AppStatus(AppState.RUNNING, roles=roles).format().splitlines()
    assert " *w[0]:RUNNING" in lines and "  w[1]:PENDING" in lines
    assert "  w[2]:FAILED (no reply file)" in lines


def test_long_message_breaks_at_first_space_after_80_chars() -> None:
    words = [f"word{i:02d}" for i in range(40)]  # 6 characters each
    msg = " ".join(words)
    text = wrap_error_message(msg)
    lines = text.splitlines()
    assert lines[0].startswith("    error_msg: word00 ")
    pieces = [lines[0][len("    error_msg: ") :]] + [
        line[len("    error_msg: ") :] for line in lines[1:]
    ]
    assert all(line.startswith(" " * len("    error_msg: ")) for line in lines[1:])
    # nothing lost, nothing added: the pieces put back together are the message
    assert "".join(pieces) == msg
    # a piece ends at the first space once it holds 80 characters: 12 words of 7 incl. space
    assert [len(p) for p in pieces[:-1]] == [83, 84, 84]
    assert all(p.startswith(" ") for p in pieces[1:])


def test_rpc_and_embedded_errors_are_cut_to_the_error() -> None:
    rpc = (
        "noise before\n"
        "RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):\n"
        "Traceback (most recent call last):\n"
        "  File x\n"
        "')\n"
        "noise after"
    )
    assert wrap_error_message(rpc, header="e: ").startswith("e: RuntimeError('On WorkerInfo(id=1")
    assert "noise" not in wrap_error_message(rpc, header="e: ")
    cuda = "c10::Error: CUDA error: illegal memory access\nException raised from f at a.cpp:7"
    assert (
        wrap_error_message(cuda, header="e: ") == "e: c10::Error: CUDA error: illegal memory access"
    )


def test_wrap_width_must_be_positive() -> None:
    with pytest.raises(InvalidSpecError, match="width=-1"):
        wrap_error_message("x", width=-1)


def test_format_masks_secrets_before_breaking_lines() -> None:
    secret = "correct horse battery staple"
    filler = "x" * 78
    reply = json.dumps({"message": f"{filler} {secret} tail", "errorCode": 1})
    status = AppStatus(
        AppState.FAILED,
        msg=f"login with {secret}",
        structured_error_msg=json.dumps({"stderr_tail": [secret]}),
        ui_url=f"http://ui/?token={secret}",
        roles=[RoleStatus("w", [ReplicaStatus(0, AppState.FAILED, "w", "h", reply)])],
    )
    redact = Redactor([secret])
    # redacting the text afterwards misses the secret the line break split ...
    assert "correct" in redact(status.format())
    # ... masking before the layout does not
    masked = status.format(redact=redact)
    assert "correct" not in masked and "staple" not in masked
    assert masked.count("***") == 4


def test_repr_is_torchx_yaml_block() -> None:
    status = two_roles()
    status.structured_error_msg = NESTED
    text = repr(status)
    assert text.startswith("AppStatus:\n  msg: worker/1 failed\n")
    assert str(status) == text
    data = yaml.safe_load(text)["AppStatus"]
    assert list(data) == sorted(data)
    assert data["state"] == "FAILED (5)"
    assert data["num_restarts"] == 1 and data["ui_url"] == "http://ui/app-1"
    assert data["structured_error_msg"]["message"]["errorCode"] == 3  # parsed JSON
    worker = data["roles"][0]
    assert worker["role"] == "worker"
    assert worker["replicas"][0] == {
        "id": 1,
        "state": "FAILED (5)",
        "role": "worker",
        "hostname": "node-1",
        "structured_error_msg": NESTED,  # replicas' replies stay as written
        "hostaddr": "node-1",
    }


@pytest.mark.parametrize("error", ["<NONE>", "node lost: {oops", '"just a json string"'])
def test_repr_never_fails_on_what_a_job_wrote(error: str) -> None:
    data = yaml.safe_load(repr(AppStatus(AppState.FAILED, structured_error_msg=error)))
    assert data["AppStatus"]["structured_error_msg"] == (
        "just a json string" if error.startswith('"') else error
    )


def test_repr_tolerates_a_state_given_as_its_value() -> None:
    data = yaml.safe_load(repr(AppStatus(5)))  # type: ignore[arg-type]
    assert data["AppStatus"]["state"] == "FAILED (5)"


def test_to_json_is_torchx_dict() -> None:
    status = two_roles()
    data = status.to_json()
    assert isinstance(data, dict)
    assert set(data) == {"state", "num_restarts", "roles", "msg", "structured_error_msg", "url"}
    assert data["state"] == "FAILED" and data["url"] == "http://ui/app-1"
    replica = data["roles"][0]["replicas"][0]
    assert replica["state"] == AppState.FAILED and replica["hostaddr"] == "node-1"
    again = json.loads(json.dumps(data))
    assert again["roles"][0]["replicas"][0]["state"] == AppState.FAILED.value
    assert [r["role"] for r in status.to_json(filter_roles=["ps"])["roles"]] == ["ps"]


def test_hostaddr_defaults_to_hostname_and_round_trips() -> None:
    default = ReplicaStatus(0, AppState.RUNNING, "w", "node-0")
    explicit = ReplicaStatus(1, AppState.RUNNING, "w", "node-1", hostaddr="10.0.0.7")
    assert default.hostaddr == "node-0" and explicit.hostaddr == "10.0.0.7"
    status = AppStatus(AppState.RUNNING, roles=[RoleStatus("w", [default, explicit])])
    data = status.to_dict()
    assert data["roles"][0]["replicas"][1]["hostaddr"] == "10.0.0.7"
    assert AppStatus.from_dict(data) == status
    del data["roles"][0]["replicas"][1]["hostaddr"]  # a dict written before hostaddr existed
    assert AppStatus.from_dict(data).roles[0].replicas[1].hostaddr == "node-1"


def test_raise_for_status_message_is_documented_one() -> None:
    status = two_roles()
    with pytest.raises(AppStatusError) as e:
        status.raise_for_status()
    assert e.value.status is status and e.value.app_status is status
    assert str(e.value) == f"job did not succeed: {status!r}"
    assert isinstance(e.value, AnylaunchError)
    AppStatus(AppState.SUCCEEDED).raise_for_status()


def test_app_status_error_args_and_pickle() -> None:
    status = AppStatus(AppState.CANCELLED, msg="stopped")
    custom = AppStatusError(status, "my message")
    assert str(custom) == "my message" and custom.status is status
    back = pickle.loads(pickle.dumps(AppStatusError(status)))
    assert isinstance(back, AppStatusError)
    assert back.status == status and str(back) == f"job did not succeed: {status!r}"


def test_parse_error_reply_none_when_no_reply() -> None:
    assert parse_error_reply("<NONE>") is None
    assert parse_error_reply("") is None
