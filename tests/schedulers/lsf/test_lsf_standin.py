"""The stand-in LSF commands honour the LSF command contract the scheduler relies on.

They are the lsf scheduler's test backend, so they are tested first: LSF's real option syntax
is accepted, what LSF rejects is rejected (exit 255, nothing submitted), and jobs really run:
states, exit codes, output files, kills, arrays and dependencies are real.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.schedulers.lsf.conftest import LsfCluster, wait_until


def run(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), input=stdin, capture_output=True, text=True, timeout=30, check=False
    )


def submit(*argv: str, stdin: str | None = None) -> int:
    proc = run("bsub", *argv, stdin=stdin)
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"Job <(\d+)> is submitted to (default )?queue <\w+>\.", proc.stdout)
    assert match, proc.stdout
    return int(match.group(1))


def bjobs_json(*argv: str) -> list[dict[str, str]]:
    proc = run("bjobs", *argv)
    data = json.loads(proc.stdout)
    assert data["COMMAND"] == "bjobs" and data["JOBS"] == len(data["RECORDS"])
    records: list[dict[str, str]] = data["RECORDS"]
    return records


def stat_of(job_id: int) -> str:
    return bjobs_json("-o", "stat", "-json", str(job_id))[0]["STAT"]


def wait_stat(job_id: int, *stats: str) -> str:
    return str(wait_until(lambda: (s := stat_of(job_id)) in stats and s, f"job {job_id} {stats}"))


# --- accepted syntax ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        ["-R", "span[hosts=1] rusage[mem=4096MB/job]"],
        [
            "-R",
            "select[type==any] order[r15s:pg] rusage[mem=4GB:duration=30m, lic=1] span[hosts=1]",
        ],
        ["-R", "rusage[mem=20:swp=50:duration=1h, license=1:duration=2]"],
        ["-R", "rusage[mem=100] || rusage[swp=100]"],
        ["-R", "span[ptile=2]", "-R", "rusage[mem=2G]"],
        ["-R", "type==any"],
        ["-gpu", "num=2:mode=exclusive_process:j_exclusive=yes"],
        ["-gpu", "-"],
        ["-n", "2,4"],
        ["-env", "all, ~HOME, A='x,y', B=2"],
        ["-env", "none"],
        ["-J", "arr[1-3,7]%2"],
        ["-Jd", "any description * with wildcards"],
        ["-q", "short", "-P", "my_project", "-W", "10", "-M", "1G", "-x", "-N"],
        ["-oo", "%J.out", "-eo", "%J.err", "-cwd", "/tmp"],
    ],
)
def test_bsub_accepts_real_lsf_syntax(lsf_cluster: LsfCluster, options: list[str]) -> None:
    job_id = submit(*options, "true")
    assert stat_of(job_id) in ("PEND", "RUN", "DONE")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["-Z"], "illegal option -- Z"),
        (["-R", "rusage[mem=4XB]"], "Bad resource requirement syntax"),
        (["-R", "rusage[mem=lots]"], "Bad resource requirement syntax"),
        (["-R", "span[hosts=1"], "Bad resource requirement syntax"),
        (["-R", "span[hosts=0]"], "Bad resource requirement syntax"),
        (["-R", "span[nodes=1]"], "Bad resource requirement syntax"),
        (["-R", "spam[hosts=1]"], "Bad resource requirement syntax"),
        (["-R", "rusage[]"], "Bad resource requirement syntax"),
        (["-R", "rusage[mem=1]rusage[mem=2]x"], "Bad resource requirement syntax"),
        (["-gpu", "num=0"], "Bad GPU requirement syntax"),
        (["-gpu", "count=1"], "Bad GPU requirement syntax"),
        (["-n", "0"], "Bad argument for option -n"),
        (["-n", "4,2"], "Bad argument for option -n"),
        (["-env", "A='x,y"], "Bad -env syntax"),
        (["-q", "nosuchqueue"], "nosuchqueue: No such queue. Job not submitted."),
        (["-w", "started(12345)"], "12345: No matching job found"),
        (["-w", "started(("], "Dependency condition syntax error"),
        (["-J", "bad[1-"], "Bad job name"),
        (["-J", "arr[5-2]"], "Bad job array index list"),
        (["-o", "a", "-oo", "b"], "cannot be used together"),
        (["-Is"], "interactive jobs are not supported"),
    ],
)
def test_bsub_rejects_what_lsf_rejects(
    lsf_cluster: LsfCluster, options: list[str], message: str
) -> None:
    proc = run("bsub", *options, "true")
    assert proc.returncode == 255
    assert message in proc.stderr
    assert "is submitted" not in proc.stdout
    assert lsf_cluster.jobs() == []


def test_bsub_without_a_command_reads_the_script_from_stdin(lsf_cluster: LsfCluster) -> None:
    assert "option requires an argument -- q" in run("bsub", "-q").stderr
    assert "No command is specified" in run("bsub", stdin="").stderr
    assert "No command is specified" in run("bsub", stdin="#!/bin/sh\n# only comments\n").stderr
    out = lsf_cluster.state_dir / "out.txt"
    script = f'#!/bin/sh\n#BSUB -J from-script\n#BSUB -oo {out}\necho "$LSB_JOBNAME"\n'
    job_id = submit(stdin=script)
    wait_stat(job_id, "DONE")
    assert out.read_text().startswith("from-script\n")
    # the command line wins over #BSUB lines
    job_id = submit("-J", "from-cli", stdin=script)
    wait_stat(job_id, "DONE")
    assert lsf_cluster.job(job_id)["name"] == "from-cli"


def test_the_command_line_runs_under_sh_like_lsf(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    # bsub joins the command words with spaces and the job runs them through /bin/sh
    out = tmp_path / "out"
    job_id = submit("-oo", str(out), "echo", "a   b;", "echo", "$LSB_JOBID")
    wait_stat(job_id, "DONE")
    assert out.read_text().splitlines()[:2] == ["a b", str(job_id)]


# --- running jobs ------------------------------------------------------------------------------


def test_states_exit_codes_output_files_and_report(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    lsf_cluster.configure(dispatch_delay_s=0.5)
    go = tmp_path / "go"
    job_id = submit(
        "-J", "steps", "-o", str(tmp_path / "%J.out"), "-e", str(tmp_path / "%J.err"),
        f"while [ ! -e {go} ]; do sleep 0.05; done; echo out; echo err >&2; exit 7",
    )  # fmt: skip
    assert stat_of(job_id) == "PEND"
    records = bjobs_json("-o", "jobid stat pend_reason", "-json", str(job_id))
    assert records[0]["PEND_REASON"] == "New job is waiting for scheduling"
    wait_stat(job_id, "RUN")
    go.touch()
    wait_stat(job_id, "EXIT")
    record = bjobs_json(
        "-a", "-o", "jobid job_name stat exit_code exit_reason exec_host output_file", "-json"
    )[0]
    assert record["EXIT_CODE"] == "7" and record["EXIT_REASON"] == ""
    assert record["JOB_NAME"] == "steps"
    assert record["OUTPUT_FILE"] == str(tmp_path / f"{job_id}.out")
    assert record["EXEC_HOST"]
    output = (tmp_path / f"{job_id}.out").read_text()
    assert output.startswith("out\n") and "Exited with exit code 7." in output
    assert (tmp_path / f"{job_id}.err").read_text() == "err\n"
    ok = submit("-oo", str(tmp_path / "ok.out"), "true")
    wait_stat(ok, "DONE")
    assert bjobs_json("-o", "exit_code", "-json", str(ok))[0]["EXIT_CODE"] == ""
    assert "Successfully completed." in (tmp_path / "ok.out").read_text()


def test_bkill_terminates_the_whole_job(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # the job leaves a grandchild that ignores SIGINT/SIGTERM: only SIGKILL ends it
    job_id = submit("sh", "-c", f"'trap \"\" INT TERM; sleep 300 & echo $! > {pids}; wait'")
    wait_until(lambda: pids.exists() and pids.read_text().strip(), "the job to start")
    child = int(pids.read_text())
    proc = run("bkill", str(job_id))
    assert proc.returncode == 0 and proc.stdout.strip() == f"Job <{job_id}> is being terminated"
    wait_stat(job_id, "EXIT")
    record = bjobs_json("-o", "stat exit_reason", "-json", str(job_id))[0]
    assert record["EXIT_REASON"] == "TERM_OWNER: job killed by owner"
    standin = lsf_cluster.standin
    wait_until(lambda: standin.process_start(child) is None, "the job's processes to end")
    again = run("bkill", str(job_id))
    assert again.returncode == 255 and "Job has already finished" in again.stderr
    unknown = run("bkill", "999999")
    assert unknown.returncode == 255 and "No matching job found" in unknown.stderr
    assert run("bkill").returncode == 255


def test_bkill_of_a_pending_job_ends_it_at_once(lsf_cluster: LsfCluster) -> None:
    lsf_cluster.configure(dispatch_delay_s=60)
    job_id = submit("true")
    assert stat_of(job_id) == "PEND"
    assert run("bkill", str(job_id)).returncode == 0
    assert stat_of(job_id) == "EXIT"


def test_dependencies_hold_a_job_until_the_condition(
    lsf_cluster: LsfCluster, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    first = submit("-J", "first-1", f"while [ ! -e {go} ]; do sleep 0.05; done")
    after_start = submit("-w", 'started("first-1")', "true")
    after_done = submit("-w", f"done({first}) && !exit(first-1)", "true")
    wait_stat(after_start, "DONE")
    assert stat_of(after_done) == "PEND"
    reason = bjobs_json("-o", "pend_reason", "-json", str(after_done))[0]["PEND_REASON"]
    assert reason == "Job dependency condition not satisfied"
    go.touch()
    wait_stat(after_done, "DONE")


def test_job_arrays(lsf_cluster: LsfCluster, tmp_path: Path) -> None:
    job_id = submit("-J", "arr[1-3]", "-oo", str(tmp_path / "out.%I"), 'echo "$LSB_JOBINDEX"')
    wait_until(
        lambda: all(r["STAT"] == "DONE" for r in bjobs_json("-o", "stat", "-json", str(job_id))),
        "the array to finish",
    )
    records = bjobs_json("-o", "jobid jobindex job_name", "-json", str(job_id))
    assert [r["JOB_NAME"] for r in records] == ["arr[1]", "arr[2]", "arr[3]"]
    assert {r["JOBID"] for r in records} == {str(job_id)}
    for i in (1, 2, 3):
        assert (tmp_path / f"out.{i}").read_text().startswith(f"{i}\n")
    assert len(bjobs_json("-o", "jobid", "-json", f"{job_id}[2]")) == 1


def test_env_propagation(
    lsf_cluster: LsfCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUBMIT_VAR", "from-submitter")
    script = 'echo "${SUBMIT_VAR-unset} ${A-unset} ${B-unset}"'
    cases = {
        None: "from-submitter unset unset",
        "all, ~SUBMIT_VAR, A='x,y'": "unset x,y unset",
        "none": "unset unset unset",
        "B=2": "unset unset 2",
    }
    for i, (env, expected) in enumerate(cases.items()):
        out = tmp_path / f"out{i}"
        job_id = submit(*(["-env", env] if env else []), "-oo", str(out), script)
        wait_stat(job_id, "DONE")
        assert out.read_text().splitlines()[0] == expected, env


def test_resources_that_fit_no_host_pend_forever(lsf_cluster: LsfCluster) -> None:
    job_id = submit("-R", "span[hosts=1] rusage[mem=1TB/job]", "true")
    time.sleep(0.3)
    assert stat_of(job_id) == "PEND"
    reason = bjobs_json("-o", "pend_reason", "-json", str(job_id))[0]["PEND_REASON"]
    assert "resource reservation not satisfied" in reason


def test_a_job_whose_runner_died_is_unknown(lsf_cluster: LsfCluster) -> None:
    job_id = submit("sleep", "300")
    wait_stat(job_id, "RUN")
    job = lsf_cluster.job(job_id)
    os.kill(job["runner_pid"], 9)
    wait_stat(job_id, "UNKWN")
    os.killpg(job["job_pgid"], 9)


# --- bjobs -------------------------------------------------------------------------------------


def test_bjobs_filters_and_formats(lsf_cluster: LsfCluster) -> None:
    a = submit("-J", "app-a-0", "-Jd", "anylaunch app=a role=w", "true")
    b = submit("-J", "app-b-0", "-Jd", "anylaunch app=b role=w", "-q", "short", "true")
    wait_stat(a, "DONE")
    wait_stat(b, "DONE")
    assert [
        r["JOBID"] for r in bjobs_json("-a", "-o", "id", "-json", "-Jd", "anylaunch app=a *")
    ] == [str(a)]
    assert len(bjobs_json("-a", "-o", "id", "-json", "-Jd", "anylaunch *")) == 2
    assert [r["JOBID"] for r in bjobs_json("-a", "-o", "id", "-json", "-J", "app-b*")] == [str(b)]
    assert [r["JOBID"] for r in bjobs_json("-a", "-o", "id", "-json", "-q", "short")] == [str(b)]
    # finished jobs only show with -a (or -d)
    assert bjobs_json("-o", "id", "-json") == []
    text = run("bjobs", "-a", "-noheader", "-o", "jobid stat delimiter=','")
    assert text.stdout.splitlines() == [f"{a},DONE", f"{b},DONE"]
    header = run("bjobs", "-a", "-o", "jobid stat")
    assert header.stdout.splitlines()[0].split() == ["JOBID", "STAT"]


def test_bjobs_rejections_and_not_found(lsf_cluster: LsfCluster) -> None:
    proc = run("bjobs", "-o", "jobid", "-json", "-noheader")
    assert proc.returncode == 255 and "cannot be used together" in proc.stderr
    proc = run("bjobs", "-o", "jobid no_such_field")
    assert proc.returncode == 255 and "Illegal field name" in proc.stderr
    proc = run("bjobs", "-Q")
    assert proc.returncode == 255 and "illegal option" in proc.stderr
    proc = run("bjobs", "-o", "jobid stat", "-json", "4242")
    assert proc.returncode == 255
    assert json.loads(proc.stdout)["RECORDS"] == [
        {"JOBID": "4242", "ERROR": "Job <4242> is not found"}
    ]
    assert json.loads(run("bjobs", "-a", "-o", "id", "-json").stdout)["RECORDS"] == []
    lsf_cluster.configure(json_when_empty="message")
    proc = run("bjobs", "-a", "-o", "id", "-json")
    assert proc.returncode == 255 and proc.stderr.strip() == "No job found"


def test_forced_states_show_until_the_job_ends(lsf_cluster: LsfCluster) -> None:
    job_id = submit("sleep", "300")
    wait_stat(job_id, "RUN")
    for stat in ("SSUSP", "USUSP", "ZOMBI", "UNKWN"):
        lsf_cluster.force_stat(job_id, stat)
        assert stat_of(job_id) == stat
    run("bkill", str(job_id))
    wait_stat(job_id, "EXIT")


def test_commands_fail_without_a_cluster(
    monkeypatch: pytest.MonkeyPatch, lsf_cluster: LsfCluster
) -> None:
    monkeypatch.delenv(lsf_cluster.standin.STATE_ENV)
    proc = run("bjobs")
    assert proc.returncode == 255 and "LSF is down" in proc.stderr
