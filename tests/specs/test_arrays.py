"""Array specs, sweeps, their macros and the array status rule (no backend needed)."""

from __future__ import annotations

import math
import subprocess
from typing import Any

import pytest

import anylaunch.specs as specs
from anylaunch.schedulers.common.arrays import (
    IndexFacts,
    array_meta,
    array_response,
    index_script,
    read_array_meta,
)
from anylaunch.specs import AppState, AppStatus, ArraySpec, ArrayStatus, InvalidSpecError
from anylaunch.specs.arrays import preview, resolve_index
from anylaunch.specs.serialize import appdef_from_dict, appdef_to_dict


def _app(args: list[str], **kwargs: Any) -> specs.AppDef:
    role = specs.Role("w", image=".", entrypoint="sh", args=args, **kwargs)
    return specs.AppDef("a", [role])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"size": 0}, "ArraySpec.size"),
        ({"size": 100_001}, "ArraySpec.size"),
        ({"size": True}, "ArraySpec.size"),
        ({"size": 2.0}, "ArraySpec.size"),
        ({"size": 4, "parallelism": 0}, "ArraySpec.parallelism"),
        ({"size": 4, "parallelism": 5}, "ArraySpec.parallelism"),
        ({"size": 4, "min_success_ratio": 0}, "ArraySpec.min_success_ratio"),
        ({"size": 4, "min_success_ratio": 1.5}, "ArraySpec.min_success_ratio"),
        ({"size": 4, "min_success_ratio": math.nan}, "ArraySpec.min_success_ratio"),
        ({"size": 4, "min_success_ratio": "1"}, "ArraySpec.min_success_ratio"),
        ({"size": 4, "indices": [4]}, "ArraySpec.indices[]"),
        ({"size": 4, "indices": [1, 1]}, "ArraySpec.indices"),
        ({"size": 4, "indices": []}, "ArraySpec.indices"),
        ({"size": 4, "indices": "1"}, "ArraySpec.indices"),
    ],
)
def test_array_spec_refuses_bad_values_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        ArraySpec(**kwargs)
    assert caught.value.field == field
    assert "Fix:" in str(caught.value)


def test_array_apps_have_one_role_of_one_replica() -> None:
    role = specs.Role("w", image=".", entrypoint="echo")
    with pytest.raises(InvalidSpecError, match=r"AppDef.roles=\['w', 'v'\]"):
        specs.AppDef("a", [role, specs.Role("v", image=".")], array=ArraySpec(2))
    with pytest.raises(InvalidSpecError, match=r"AppDef\.array"):
        specs.AppDef("a", [role], array=3)  # type: ignore[arg-type]
    app = specs.AppDef("a", [role], array=ArraySpec(2))
    app.roles[0].num_replicas = 3  # changed after creation: validate() still catches it
    with pytest.raises(InvalidSpecError, match=r"Role\.num_replicas=3"):
        app.validate()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ([], "params"),
        ("lr=1", "params"),
        ({"lr": 1}, "params"),
        ([{"lr": 1}, 3], "params[1]"),
        ([{"1lr": 1}], "params[0]"),
        ([{"lr-x": 1}], "params[0]"),
        ([{"lr": 1}, {"lr": 2, "x": 3}], "params[1]"),
        ([{"lr": 1, "LR": 2}], "params[0]"),
        ([{"lr": None}], "params[].lr"),
        ([{"lr": [1]}], "params[].lr"),
        ([{"lr": math.inf}], "params[].lr"),
        ([{"lr": "a\x00b"}], "params[].lr"),
    ],
)
def test_sweep_refuses_bad_parameters_naming_them(params: Any, field: str) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        specs.sweep(_app(["x"]), params)
    assert caught.value.field == field


def test_sweep_fills_params_and_index_per_index_and_leaves_other_macros() -> None:
    app = _app(
        ["--lr=${param.lr}", "--i", "${array_index}", "${app_id}", "$${param.lr}"],
        env={"OUT": "/out/${param.name}-${array_index}"},
    )
    swept = specs.sweep(app, [{"lr": 0.1, "name": "a"}, {"lr": 2, "name": "b b"}], parallelism=1)
    assert swept.array is not None and app.array is None  # a copy
    resolved = resolve_index(swept.roles[0], swept.array, 1)
    assert resolved.args == ["--lr=2", "--i", "1", "${app_id}", "${param.lr}"]
    assert resolved.env == {
        "OUT": "/out/b b-1",
        "ANYLAUNCH_ARRAY_INDEX": "1",
        "ANYLAUNCH_ARRAY_SIZE": "2",
        "ANYLAUNCH_PARAM_LR": "2",
        "ANYLAUNCH_PARAM_NAME": "b b",
    }
    assert swept.roles[0].args[0] == "--lr=${param.lr}"  # the definition keeps its macros


def test_index_script_gives_each_task_its_index_params_and_quoted_args() -> None:
    hostile = "x'; touch /tmp/anylaunch-pwned; echo '"
    app = _app(
        [
            'echo "$ANYLAUNCH_ARRAY_INDEX|$ANYLAUNCH_PARAM_V|$0|$1|$OUT"',
            "${param.v}",
            "${array_index}",
        ],
        env={"OUT": "o-${param.v}"},
    )
    app.roles[0].args.insert(0, "-c")
    swept = specs.sweep(app, [{"v": hostile}, {"v": "b"}, {"v": "$(id)"}])
    assert swept.array is not None
    retry = specs.ArraySpec(3, params=swept.array.params, indices=[0, 2])
    script = index_script(swept.roles[0], retry, '"$1"')
    outputs = []
    for position in ("0", "1"):
        done = subprocess.run(
            ["sh", "-c", script, "sh", position],
            capture_output=True,
            text=True,
            env={"OUT": "unset", "PATH": "/usr/bin:/bin"},
            check=True,
        )
        outputs.append(done.stdout.strip())
    assert outputs == [f"0|{hostile}|{hostile}|0|o-{hostile}", "2|$(id)|$(id)|2|o-$(id)"]
    bad = subprocess.run(["sh", "-c", script, "sh", "2"], capture_output=True, text=True)
    assert bad.returncode == 97 and "no index at array position 2" in bad.stderr


def test_preview_shows_resolved_commands_and_summarises_large_arrays() -> None:
    app = specs.sweep(_app(["${param.n}"]), [{"n": i * 10} for i in range(100)], parallelism=7)
    text = preview(app)
    lines = text.splitlines()
    assert lines[0] == "array: 100 indices, at most 7 at once, succeeds when 100 of 100 succeed"
    assert lines[1] == "  [0] sh 0" and lines[-1] == "  [99] sh 990"
    assert "... 76 more ..." in text and len(lines) == 26


def _status(states: dict[int, AppState], size: int = 10, ratio: float = 1.0) -> ArrayStatus:
    return ArrayStatus(size, states, {}, ratio)


def test_array_state_rule() -> None:
    S = AppState
    assert _status({}).app_state() == S.PENDING
    assert _status({0: S.SUBMITTED}, size=1).app_state() == S.SUBMITTED
    assert _status({0: S.RUNNING}).app_state() == S.RUNNING
    assert _status({0: S.FAILED}).app_state() == S.RUNNING  # others still to run
    done = {i: S.SUCCEEDED for i in range(10)}
    assert _status(done).app_state() == S.SUCCEEDED
    assert _status({**done, 3: S.FAILED}).app_state() == S.FAILED
    assert _status({**done, 3: S.FAILED}, ratio=0.9).app_state() == S.SUCCEEDED
    assert _status({**done, 3: S.FAILED, 4: S.FAILED}, ratio=0.9).app_state() == S.FAILED
    assert _status({**done, 3: S.CANCELLED}).app_state() == S.CANCELLED
    assert _status({**done, 3: S.CANCELLED, 4: S.FAILED}).app_state() == S.FAILED
    retry = ArrayStatus(10, {7: S.SUCCEEDED}, selected=(7,))
    assert retry.app_state() == S.SUCCEEDED and retry.summary().startswith("array: 1/1")


def test_array_status_round_trips_compactly_and_names_failures() -> None:
    size = 100_000
    states = {i: AppState.SUCCEEDED for i in range(size)}
    for i in range(0, size, 997):
        states[i] = AppState.FAILED
    status = ArrayStatus(size, states, {i: 3 for i in range(0, size, 997)}, 0.99)
    data = status.to_dict()
    assert data["counts"] == {"SUCCEEDED": size - 101, "FAILED": 101}
    assert ArrayStatus.from_dict(data) == status
    assert len(data["indices"]["SUCCEEDED"]) < 1500  # ranges, not 100,000 numbers
    assert status.app_state() == AppState.SUCCEEDED  # 99.9% >= 99%
    assert "failed indices: 0 (exit 3), 997 (exit 3)" in status.summary()
    assert status.summary().endswith("and 81 more")
    app_status = AppStatus(AppState.SUCCEEDED, array=status)
    assert AppStatus.from_dict(app_status.to_dict()) == app_status
    assert "array:" in repr(app_status)


def test_array_meta_and_response() -> None:
    array = ArraySpec(20, parallelism=4, min_success_ratio=0.5, indices=[7, 9])
    meta = read_array_meta(array_meta(array))
    assert (meta.size, meta.min_success_ratio, meta.selected) == (20, 0.5, (7, 9))
    found = array_response(
        meta, "w", {7: IndexFacts(AppState.FAILED, 1), 9: IndexFacts(AppState.SUCCEEDED, 0)}
    )
    assert found.state == AppState.SUCCEEDED  # 1 of 2 at ratio 0.5
    assert [r.id for r in found.roles_statuses[0].replicas] == [7, 9]
    with pytest.raises(InvalidSpecError, match="array metadata"):
        read_array_meta("size=x")


def test_array_apps_serialize_and_round_trip() -> None:
    app = specs.sweep(_app(["${param.a}"]), [{"a": 1}, {"a": "two"}], min_success_ratio=0.5)
    data = appdef_to_dict(app)
    assert data["array"]["params"] == [{"a": "1"}, {"a": "two"}]
    assert appdef_from_dict(data) == app
    with pytest.raises(InvalidSpecError, match=r"AppDef\.array\.paralelism"):
        appdef_from_dict({**data, "array": {"size": 2, "paralelism": 1}})


@pytest.mark.parametrize("scheduler", ["kubernetes_mcad", "aws_sagemaker"])
def test_schedulers_without_arrays_refuse_them_before_submitting(scheduler: str) -> None:
    from anylaunch.runner import get_runner

    app = _app(["x"], resource=specs.Resource(cpu=1, gpu=0, memMB=64))
    app.array = ArraySpec(3)
    with get_runner() as runner, pytest.raises(InvalidSpecError) as caught:
        runner.dryrun(app, scheduler, cfg=_CFGS[scheduler])
    assert caught.value.field == "AppDef.array"
    assert f"the {scheduler} scheduler does not run arrays" in str(caught.value)


_CFGS: dict[str, dict[str, Any]] = {
    "kubernetes_mcad": {"namespace": "default"},
    "aws_sagemaker": {"role": "arn:aws:iam::123456789012:role/r"},
}


@pytest.mark.parametrize("indices", [[], "7", [-1], [True], [1.5], None])
def test_retry_indices_refuses_bad_indices_before_any_lookup(indices: Any) -> None:
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        scheduler = runner._scheduler("local_cwd")
        with pytest.raises(InvalidSpecError) as caught:
            scheduler.retry_indices("no-such-app", indices)
    assert caught.value.field == "indices"


def test_log_pump_add_refuses_what_is_not_replica_pairs() -> None:
    from anylaunch.runner import get_runner
    from anylaunch.runner.logs import LogPump

    with get_runner() as runner:
        pump = LogPump(runner, "local_cwd://s/app-1", [], lambda role, k, line: None)
        for bad in ([("w", -1)], "w/0", [("w",)], 3):
            with pytest.raises(InvalidSpecError, match="replicas="):
                pump.add(bad)  # type: ignore[arg-type]
        assert pump.add([("w", 0), ("w", 0)]) == 1  # a pair is read once
