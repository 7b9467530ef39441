"""The CLI of job arrays: ``run --array/--sweep`` (parsing, validation, dryrun), ``status``
of an array (summary, ranges, compact table), the live view's progress, ``log --index`` and
``retry-failed``.

Validation runs the real ``anylaunch`` command in a subprocess (errors are refused before any
scheduler loads). The dryrun runs through ``arrdry``: a plugin scheduler (a real
``anylaunch_plugins`` namespace package put on the CLI's path) that is local_cwd declaring
``supports_arrays``, so the base class's array path (no refusal, every index's resolved
command after the request) runs for real; it is a dryrun stand-in only and submits nothing.
Status and progress rendering take real ``AppStatus``/``ArrayStatus`` values, and one small
array runs end to end on the real local_cwd scheduler (run --wait --log, status, log --index,
retry-failed).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from anylaunch.cli.arrays import array_rows, parse_array_flag, parse_index_flag
from anylaunch.cli.live import role_progress
from anylaunch.cli.tables import format_status
from anylaunch.specs import AppState, AppStatus, ArrayStatus, ReplicaStatus, RoleStatus
from anylaunch.specs.errors import InvalidSpecError
from tests.cli.conftest import with_plugin_scheduler

ARRDRY = '''\
from typing import Any

from anylaunch.plugins import register
from anylaunch.schedulers import Scheduler
from anylaunch.schedulers.local_scheduler import LocalScheduler


class ArrayDryrunScheduler(LocalScheduler):
    """local_cwd that lets array apps through the base class's dryrun (never submitted)."""

    supports_arrays = True

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, state_dir=kwargs.get("state_dir"))
        self.backend = "arrdry"


@register.scheduler()
def arrdry(session_name: str, **kwargs: Any) -> Scheduler[Any]:
    return ArrayDryrunScheduler(session_name, **kwargs)
'''

SAGEMAKER_CFG = "role_arn=arn:aws:iam::123456789012:role/r,output_path=s3://bucket/out/"


@pytest.fixture
def arr_cli(cli: Any, tmp_path: Path) -> Any:
    """The CLI with the ``arrdry`` plugin scheduler on its path."""
    return with_plugin_scheduler(cli, tmp_path, "arrdry", ARRDRY)


def one_error(result: Any, *fragments: str) -> str:
    """The command failed with exit 1 and one error line naming ``fragments``."""
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if "error:" in ln]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --- run: parsing and validation --------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "fragments"),
    [
        (["--array", "20%x"], ["--array='20%x'", "PARALLELISM 'x' is not a whole", "--array 20%4"]),
        (["--array", "0"], ["--array='0'", "SIZE must be between 1 and 100000"]),
        (["--array", "-3"], ["--array='-3'", "SIZE '-3' is not a whole number"]),
        (["--array", "20%21"], ["PARALLELISM must be between 1 and 20"]),
        (["--array", "20%4", "--parallelism", "2"], ["--parallelism='2'", "once"]),
        (["--array", "5", "--parallelism", "6"], ["--parallelism='6'", "1 to 5"]),
        (["--parallelism", "3"], ["--parallelism='3'", "arrays only", "--array SIZE"]),
        (["--min-success-ratio", "0.5"], ["--min-success-ratio='0.5'", "arrays only"]),
        (["--array", "5", "--min-success-ratio", "0"], ["(0, 1]", "e.g. 0.9"]),
        (["--array", "5", "--min-success-ratio", "nan"], ["--min-success-ratio='nan'"]),
        (["--array", "5", "--sweep", "rows.jsonl"], ["--array='5'", "--sweep"]),
        (["--sweep", "missing.jsonl"], ["--sweep='missing.jsonl'", "cannot be read"]),
    ],
)
def test_bad_array_flags_are_refused_naming_the_flag_value_and_fix(
    cli: Any, flags: list[str], fragments: list[str]
) -> None:
    result = cli("run", "--dryrun", "-s", "local_cwd", *flags, "utils.echo", "--msg", "hi")
    line = one_error(result, *fragments)
    assert "Fix:" in line


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('{"lr": 0.1}\n\n{"lr": 0.2\n', ["line 3 is not JSON"]),
        ('{"lr": 0.1}\n[0.2]\n', ["line 2 is a JSON list, not an object"]),
        ('{"lr": 0.1}\n\n{"seed": 2}\n', ["line 3:", "['seed']", "line 1"]),
        ('{"lr": 0.1}\n{"lr": [1, 2]}\n', ["line 2: lr=[1, 2]", "is a list"]),
        ('{"lr": 0.1}\n{"bad-name": 1}\n', ["line 2:", "'bad-name'", "parameter name"]),
        ("\n\n", ["holds no parameters"]),
    ],
)
def test_a_bad_sweep_file_names_its_line(cli: Any, text: str, fragments: list[str]) -> None:
    (cli.cwd / "rows.jsonl").write_text(text)
    result = cli("run", "--dryrun", "--sweep", "rows.jsonl", "utils.echo", "--msg", "x")
    one_error(result, "--sweep='rows.jsonl'", *fragments)


def test_parse_array_flag_and_indices() -> None:
    assert parse_array_flag("20%4") == (20, 4)
    assert parse_array_flag(" 7 ") == (7, None)
    assert parse_index_flag("--index", "9,3-4") == [3, 4, 9]
    for bad in ("", "x", "1-", "3,-1", "1.5"):
        with pytest.raises(InvalidSpecError, match="--index"):
            parse_index_flag("--index", bad)


def test_an_app_of_several_replicas_cannot_be_an_array(cli: Any) -> None:
    result = cli("run", "--dryrun", "--array", "4", "utils.sh", "--num_replicas", "2", "true")
    one_error(result, "Role.num_replicas=2", "num_replicas=1")


def test_a_scheduler_without_arrays_refuses_the_array_in_dryrun(cli: Any) -> None:
    result = cli(
        "run", "--dryrun", "-s", "aws_sagemaker", "-cfg", SAGEMAKER_CFG,
        "--array", "20%4", "utils.echo", "--msg", "x",
    )  # fmt: skip
    one_error(result, "AppDef.array", "aws_sagemaker scheduler does not run arrays")


# --- run --dryrun of an array ---------------------------------------------------------------


def test_dryrun_of_an_array_shows_the_spec_and_every_indexs_command(arr_cli: Any) -> None:
    result = arr_cli(
        "run", "--dryrun", "-s", "arrdry", "--array", "20%4", "--min-success-ratio", "0.9",
        "utils.echo", "--msg", "shard-${array_index}",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "=== SCHEDULER REQUEST ===" in out
    assert "array: 20 indices, at most 4 at once, succeeds when 18 of 20 succeed" in out
    assert "  [7] echo shard-7" in out
    assert "  [19] echo shard-19" in out
    # past a few dozen indices the preview is summarised; 20 are all shown
    assert "more ..." not in out
    app = out.split("=== APPLICATION ===", 1)[1].split("=== SCHEDULER REQUEST ===")[0]
    assert "size: 20" in app and "parallelism: 4" in app


def test_dryrun_of_a_sweep_as_json(arr_cli: Any) -> None:
    rows = ['{"lr": 0.1, "opt": "adam"}', "", '{"lr": 0.01, "opt": "sgd"}', "  ", "\n"]
    (arr_cli.cwd / "sweep.jsonl").write_text("\n".join(rows))
    result = arr_cli(
        "run", "--dryrun", "--json", "-s", "arrdry", "--sweep", "sweep.jsonl",
        "--parallelism", "1", "utils.echo", "--msg", "lr=${param.lr} opt=${param.opt}",
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    array = data["app"]["array"]
    assert (array["size"], array["parallelism"]) == (2, 1)
    assert [dict(p) for p in array["params"]] == [
        {"lr": "0.1", "opt": "adam"},
        {"lr": "0.01", "opt": "sgd"},
    ]
    assert "[1] echo 'lr=0.01 opt=sgd'" in data["request"]


def test_dryrun_of_a_big_array_is_summarised(arr_cli: Any) -> None:
    result = arr_cli("run", "--dryrun", "-s", "arrdry", "--array", "1000", "utils.echo")
    assert result.returncode == 0, result.stderr
    head = "array: 1000 indices, at most 1000 at once"
    preview = result.stdout[result.stdout.index(head) :].splitlines()
    assert "  ... 976 more ..." in preview
    assert len(preview) == 1 + 24 + 1  # the first and last 12 indices' commands


# --- status and the live view ----------------------------------------------------------------


def array_status(size: int, failed: dict[int, int], running: tuple[int, ...] = ()) -> AppStatus:
    states = {i: AppState.SUCCEEDED for i in range(size)}
    states.update({i: AppState.FAILED for i in failed})
    states.update({i: AppState.RUNNING for i in running})
    array = ArrayStatus(size, states, dict(failed))
    replicas = [ReplicaStatus(i, states[i], "echo", f"node-{i % 3}") for i in range(size)]
    return AppStatus(array.app_state(), roles=[RoleStatus("echo", replicas)], array=array)


def test_status_of_a_finished_array_names_the_failed_indices() -> None:
    text = format_status(array_status(20, {7: 1}), "local_cwd://s/arr-1")
    lines = text.splitlines()

    assert "State:         FAILED" in lines
    assert (
        "Array:         array: 19/20 succeeded (20 required); failed indices: 7 (exit 1)" in lines
    )
    assert [ln for ln in lines if ln.startswith(("SUCCEEDED ", "FAILED "))] == [
        "SUCCEEDED  19     0-6,8-19",
        "FAILED     1      7",
    ]
    # the per-index table: only index 7, with its exit code
    table = text.split("ROLE  INDEX", 1)[1].splitlines()[1:]
    assert table == ["echo  7      FAILED  1     node-1"]


def test_status_of_1000_indices_stays_a_screenful_and_indices_lists_more() -> None:
    failed = {i: 2 for i in range(0, 1000, 40)}  # 25 failed
    status = array_status(1000, failed, running=tuple(range(990, 1000)))
    text = format_status(status, "local_cwd://s/arr-2")

    assert len(text.splitlines()) < 45
    assert "Array:         array: 965/1000 succeeded, 25 failed, 10 running" in text
    ranges = [ln.split() for ln in text.splitlines() if ln.startswith("FAILED ")]
    assert ranges == [["FAILED", "25", "0,40,80,120,160,200,240,280,320,360,400,440", "(+13",
                       "more", "ranges)"]]  # fmt: skip
    rows = [ln for ln in text.splitlines() if ln.startswith("echo  ")]
    assert len(rows) == 20 and rows[0].split()[1:4] == ["0", "FAILED", "2"]
    assert "(15 more indices not shown: `anylaunch status local_cwd://s/arr-2 --indices" in text
    assert array_rows(status) == ([*failed][:20], 15)

    listed = format_status(status, "local_cwd://s/arr-2", indices=list(range(100, 105)))
    rows = [ln.split()[1:3] for ln in listed.splitlines() if ln.startswith("echo  ")]
    assert rows == [[str(i), "SUCCEEDED"] for i in range(100, 105)]


def test_live_view_shows_succeeded_failed_running_of_n() -> None:
    status = array_status(20, {7: 1}, running=(16, 17, 18, 19))
    [progress] = role_progress(status)
    assert status.state == AppState.RUNNING
    assert progress.cells() == [
        "echo",
        "RUNNING",
        "array 15 succeeded / 1 failed / 4 running of 20",
    ]


# --- log --index and retry-failed on a real local_cwd app --------------------------------------


def test_log_index_and_retry_failed_refuse_an_app_that_is_not_an_array(cli: Any) -> None:
    handle = cli.launch("utils.echo", "--msg", "plain")
    cli.wait_for(handle, lambda s: AppState[str(s["state"])].is_terminal())

    one_error(cli("log", handle, "--index", "0"), "--index='0'", "is not an array app")
    one_error(cli("retry-failed", handle), "is not an array app", "retry arrays only")
    one_error(cli("status", handle, "--indices", "0"), "--indices='0'", "not an array app")
    # a path naming other replicas than --index is refused before any scheduler is asked
    one_error(cli("log", f"{handle}/echo/3", "--index", "7"), "--index='7'", "HANDLE/ROLE/7")


def test_retry_failed_is_a_subcommand_with_wait_and_json() -> None:
    from anylaunch.cli.main import create_parser, get_sub_cmds

    args = create_parser(get_sub_cmds()).parse_args(
        ["retry-failed", "slurm://s/123", "--wait", "--json"]
    )
    assert (args.command, args.app_handle, args.wait, args.json) == (
        "retry-failed",
        "slurm://s/123",
        True,
        True,
    )


def test_an_array_end_to_end_on_local_cwd(cli: Any) -> None:
    """6 indices, 2 at once, index 3 fails: the CLI's whole array path on a real backend."""
    script = "echo index=$ANYLAUNCH_ARRAY_INDEX arg=$1; test $ANYLAUNCH_ARRAY_INDEX != 3"
    result = cli(
        "run", "--wait", "--log", "-s", "local_cwd", "--array", "6%2",
        "utils.sh", "sh", "-c", script, "sh", "shard-${array_index}",
    )  # fmt: skip

    assert result.returncode == 1, result.stderr  # FAILED: 5/6 < the ratio 1.0
    handle = result.stdout.strip()
    assert result.stdout == handle + "\n"
    lines = result.stderr.splitlines()
    for i in range(6):  # merged output: role/index prefixes
        assert f"sh/{i} index={i} arg=shard-{i}" in lines
    assert "array 5 succeeded / 1 failed / 0 running of 6" in result.stderr
    assert "failed indices: 3 (exit 1)" in result.stderr

    status = cli.status(handle)
    assert status["state"] == "FAILED"
    array: Any = status["array"]
    assert array["indices"] == {"SUCCEEDED": "0-2,4-5", "FAILED": "3"}
    assert array["exit_codes"]["3"] == 1

    text = cli("status", handle)
    assert text.returncode == 0, text.stderr
    assert [ln.split()[:4] for ln in text.stdout.splitlines() if ln.startswith("sh  ")] == [
        ["sh", "3", "FAILED", "1"]
    ]

    log = cli("log", f"{handle}/sh", "--index", "3,5")
    assert log.returncode == 0, log.stderr
    assert sorted(log.stdout.splitlines()) == [
        "sh/3 index=3 arg=shard-3",
        "sh/5 index=5 arg=shard-5",
    ]
    one_error(cli("log", handle, "--index", "6"), "--index", "index 6 is not one of", "0-5")

    retried = cli("retry-failed", "--json", handle)
    assert retried.returncode == 0, retried.stderr
    data = json.loads(retried.stdout)
    assert (data["retried_from"], data["indices"]) == (handle, "3")
    again = cli.wait_for(data["app_handle"], lambda s: AppState[str(s["state"])].is_terminal())
    assert again["array"]["indices"] == {"FAILED": "3"}  # only index 3 ran, as index 3
    log = cli("log", data["app_handle"])
    assert log.stdout.splitlines() == ["sh/3 index=3 arg=shard-3"]
