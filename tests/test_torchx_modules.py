"""The TorchX HEAD modules ported under their anylaunch paths (issue 31) behave as TorchX's
docs say: deprecations, specs.capabilities, cli.colors, cli.argparse_util, notebook, and the
components docs modules (metrics.tensorboard on a real process monitor)."""

from __future__ import annotations

import argparse
import logging
import os
import pty
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import anylaunch.specs as specs
from anylaunch.cli.argparse_util import (
    ArgOnceAction,
    anylaunchconfig_list,
    anylaunchconfig_run,
    cli_defaults,
)
from anylaunch.cli.colors import ANSI_BLUE, ANSI_RESET, prefix_container_name
from anylaunch.components import get_component, get_components
from anylaunch.deprecations import deprecated, deprecated_module
from anylaunch.runner import get_runner
from anylaunch.schedulers.local import forkserver
from anylaunch.sdk import MissingDependencyError
from anylaunch.specs import AppDef, AppState, CapabilityKey, Resource, Role
from anylaunch.specs.capabilities import CapabilityTypeError
from anylaunch.specs.errors import InvalidSpecError
from tests.cli.conftest import Cli

PY = sys.executable


@pytest.fixture(autouse=True, scope="module")
def close_forkserver_connections() -> Iterator[None]:
    """The local_cwd jobs below leave no fork-server connection open at exit."""
    yield
    forkserver.close_connections()


# ---- deprecations ----


def test_deprecated_module_warns_at_the_line_that_imports_the_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "old_stub_mod.py").write_text(
        "from anylaunch.deprecations import deprecated_module\n"
        "deprecated_module(old_import='old_stub_mod', new_import='json')\n"
        "from json import *  # noqa: F403\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import old_stub_mod  # noqa: F401

    (warning,) = caught
    assert warning.category is UserWarning  # visible outside __main__, unlike Deprecation
    assert warning.filename == __file__
    assert "- from old_stub_mod import ...\n  + from json import ..." in str(warning.message)
    monkeypatch.delitem(sys.modules, "old_stub_mod")


def test_deprecated_warns_at_the_callers_line_on_every_call() -> None:
    @deprecated(replacement="anylaunch.specs.resource")
    def old_resource(cpu: int) -> int:
        """The old way."""
        return cpu * 2

    @deprecated()
    class Old:
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert old_resource(2) == 4
        old_resource(3)
        Old()
    assert [w.category for w in caught] == [UserWarning] * 3
    assert {w.filename for w in caught} == {__file__}
    assert str(caught[0].message) == (
        "[Deprecated] test_deprecated_warns_at_the_callers_line_on_every_call.<locals>."
        "old_resource is deprecated -- use anylaunch.specs.resource instead."
    )
    assert str(caught[2].message).endswith("Old is deprecated.")
    assert old_resource.__name__ == "old_resource" and old_resource.__doc__ == "The old way."


def test_deprecations_refuse_bad_arguments() -> None:
    with pytest.raises(InvalidSpecError, match=r"deprecated_module\.new_import"):
        deprecated_module("a.b", "")
    with pytest.raises(InvalidSpecError, match=r"deprecated\.replacement"):
        deprecated(replacement=3)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="is not a function or class"):
        deprecated()(42)  # type: ignore[type-var]


# ---- specs.capabilities ----


def test_capability_keys_type_check_reads_and_writes() -> None:
    assert specs.CapabilityKey is CapabilityKey and "CapabilityKey" in specs.__all__
    efa = CapabilityKey("aws", "efa_enabled", bool)
    gbps = CapabilityKey("aws", "network_bandwidth_gbps", int)
    res = Resource(cpu=4, gpu=0, memMB=1024)
    assert efa.get(res) is None and efa.get(res, default=False) is False
    gbps.set(res, 400)
    efa.set(res, True)
    assert res.capabilities == {"aws.network_bandwidth_gbps": 400, "aws.efa_enabled": True}
    assert (gbps.get(res), efa.get(res)) == (400, True)
    # the wire format is the plain key: a copy keeps it, readers may index it directly
    assert gbps.get(Resource.copy(res)) == 400 and res.capabilities[gbps.key] == 400

    res.capabilities[gbps.key] = True  # a bool is no int here, though bool subclasses int
    with pytest.raises(TypeError, match="must be a int, not a bool"):
        gbps.get(res)
    with pytest.raises(CapabilityTypeError) as refused:
        gbps.set(res, "fast")  # type: ignore[arg-type]
    assert isinstance(refused.value, InvalidSpecError)
    assert refused.value.field == "Resource.capabilities['aws.network_bandwidth_gbps']"
    with pytest.raises(InvalidSpecError, match="is not a Resource"):
        gbps.get({"aws.network_bandwidth_gbps": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match=r"CapabilityKey\.name"):
        CapabilityKey("aws", "", int)
    with pytest.raises(InvalidSpecError, match=r"CapabilityKey\.type"):
        CapabilityKey("aws", "x", "int")  # type: ignore[arg-type]


# ---- cli.colors ----


def _colors_in(env_changes: dict[str, str | None], tty: bool) -> str:
    """GREEN and ENDC as a fresh process sees them, its stdout a terminal or a pipe."""
    env = {k: v for k, v in os.environ.items() if k not in env_changes}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    code = "import anylaunch.cli.colors as c; print(repr(c.GREEN + c.ENDC))"
    if not tty:
        return subprocess.run(
            [PY, "-c", code], env=env, check=True, capture_output=True, text=True
        ).stdout.strip()
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([PY, "-c", code], env=env, stdout=follower, check=True, timeout=60)
        assert proc.returncode == 0
        return os.read(leader, 1024).decode().strip()
    finally:
        os.close(leader)
        os.close(follower)


def test_colors_go_to_a_terminal_only_and_respect_no_color() -> None:
    assert _colors_in({"NO_COLOR": None, "TERM": "xterm"}, tty=True) == "'\\x1b[32m\\x1b[0m'"
    assert _colors_in({"NO_COLOR": "1", "TERM": "xterm"}, tty=True) == "''"
    assert _colors_in({"NO_COLOR": None, "TERM": "dumb"}, tty=True) == "''"
    assert _colors_in({"NO_COLOR": None, "TERM": "xterm"}, tty=False) == "''"


def test_prefix_container_name_names_only_a_container_of_its_own() -> None:
    assert prefix_container_name("trainer-1", "trainer", 1) == ""
    prefix = prefix_container_name("sidecar", "trainer", 1)
    assert prefix in ("sidecar ", f"{ANSI_BLUE}sidecar{ANSI_RESET} ")


# ---- cli.argparse_util ----


@pytest.fixture
def cli_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "team.anylaunchconfig"
    path.write_text("")
    monkeypatch.setenv("ANYLAUNCHCONFIG", str(path))
    return path


def test_anylaunchconfig_actions_default_from_the_subcommands_section(cli_config: Path) -> None:
    cli_config.write_text("[cli:run]\nscheduler = slurm\n\n[cli:list]\nscheduler = lsf\n")
    run = argparse.ArgumentParser(exit_on_error=False)
    run.add_argument("--scheduler", action=anylaunchconfig_run, required=True)
    run.add_argument("--image", action=anylaunchconfig_run, default="python:3.11")
    assert vars(run.parse_args([])) == {"scheduler": "slurm", "image": "python:3.11"}
    assert run.parse_args(["--scheduler", "local_cwd"]).scheduler == "local_cwd"
    listing = argparse.ArgumentParser()
    listing.add_argument("--scheduler", action=anylaunchconfig_list)
    assert listing.parse_args([]).scheduler == "lsf"

    cli_config.write_text("")  # nothing configured: a required flag stays required
    required = argparse.ArgumentParser(prog="demo")
    required.add_argument("--scheduler", action=anylaunchconfig_run, required=True)
    with pytest.raises(SystemExit):
        required.parse_args([])


def test_a_flag_given_twice_is_a_usage_error_per_parse(
    cli_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="demo")
    parser.add_argument("-cfg", "--scheduler_args", action=ArgOnceAction)
    parser.add_argument("-s", action=anylaunchconfig_run)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["-cfg", "a=1", "--scheduler_args", "b=2"])
    assert exited.value.code == 2
    err = capsys.readouterr().err  # either spelling is the same flag
    assert "--scheduler_args (-cfg/--scheduler_args) is specified more than once" in err
    with pytest.raises(SystemExit):
        parser.parse_args(["-s", "x", "-s", "y"])
    # each parse has its own memory: the same flag once per parse is fine
    assert parser.parse_args(["-cfg", "a=1"]).scheduler_args == "a=1"
    assert parser.parse_args(["-cfg", "c=3"]).scheduler_args == "c=3"


def test_cli_defaults_warn_about_an_unknown_key(
    cli_config: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cli_config.write_text("[cli:run]\nschedular = slurm\ncomponent = utils.echo\nworkspace =\n")
    with caplog.at_level(logging.WARNING, logger="anylaunch.cli.argparse_util"):
        assert cli_defaults("run", ("component", "scheduler", "workspace")) == {
            "component": "utils.echo"
        }
    assert "ignoring 'schedular' in [cli:run]" in caplog.text
    assert "Did you mean 'scheduler'?" in caplog.text


def test_anylaunch_list_takes_its_scheduler_from_cli_list(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    config = tmp_path / "list.anylaunchconfig"
    config.write_text("[cli:list]\nscheduler = local_cwdd\n")
    env = {"ANYLAUNCHCONFIG": str(config)}
    listed = cli("list", env=env)
    assert listed.returncode != 0 and "local_cwdd" in listed.stderr, listed.stderr
    twice = cli("list", "-s", "local_cwd", "-cfg", "a=1", "-cfg", "b=2", env=env)
    assert (
        twice.returncode == 2
        and "-cfg (-cfg/--scheduler_args) is specified more than" in twice.stderr
    )


# ---- notebook ----

NOTEBOOK = """
import sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
import anylaunch.notebook as notebook  # in a running shell: registers the magic

assert "workspacefile" in shell.magics_manager.magics["cell"]
del shell.magics_manager.magics["cell"]["workspacefile"]
shell.run_line_magic("load_ext", "anylaunch.notebook")  # the other way in
assert "workspacefile" in shell.magics_manager.magics["cell"]
shell.run_cell("%%workspacefile pkg/hello.py\\nimport sys\\nprint('hello', sys.argv[1])\\n")
from anylaunch.specs import Workspace
from anylaunch.workspace.dir_workspace import copy_workspace

copy_workspace(Workspace.from_str(notebook.get_workspace()), sys.argv[1])
"""


def test_a_notebook_cell_becomes_a_workspace_file_a_job_runs(tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    made = subprocess.run(
        [PY, "-c", NOTEBOOK, str(job_dir)], capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    assert "Added pkg/hello.py to workspace memory://anylaunch-workspace/" in made.stdout
    role = Role("nb", image=str(job_dir), entrypoint=PY, args=["pkg/hello.py", "notebook"])
    with get_runner("notebook-test") as runner:
        handle = runner.run(AppDef("nb", [role]), "local_cwd")
        status = runner.wait(handle, wait_interval=0.2, timeout=120)
        assert status is not None and status.state == AppState.SUCCEEDED, status
        lines = list(runner.log_lines(handle, "nb", 0))
    assert [line.rstrip("\n") for line in lines] == ["hello notebook"]


def test_the_notebook_module_needs_ipython_only_for_its_magic(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["IPython"] = None  # as if IPython were not installed
        import anylaunch.notebook as nb
        nb.workspacefile("a.py", "x = 1\\n")
        try:
            nb.load_ipython_extension(object())
        except Exception as e:
            print(type(e).__name__, e)
        """
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "MissingDependencyError anylaunch.notebook's %%workspacefile magic needs" in out.stdout
    assert issubclass(MissingDependencyError, ImportError)


@pytest.mark.parametrize("line", ["", "/etc/passwd", "../outside.py", "."])
def test_workspacefile_refuses_a_path_outside_the_workspace(line: str) -> None:
    from anylaunch.notebook import workspacefile

    with pytest.raises(InvalidSpecError, match="relative to the workspace"):
        workspacefile(line, "x = 1\n")


# ---- components: interpret, metrics, train ----


def test_the_docs_modules_are_components_pages() -> None:
    names = set(get_components())
    assert "metrics.tensorboard" in names
    assert not {n for n in names if n.startswith(("interpret.", "train."))}
    assert get_component("metrics.tensorboard").description.startswith("Runs a TensorBoard")


def test_tensorboard_dry_runs_and_refuses_bad_arguments() -> None:
    with get_runner("tb-test") as runner:
        app = runner.materialize_component(
            "metrics.tensorboard", ["--logdir", "/tmp/logs", "--port", "6007", "--timeout", "5"]
        )
        info = runner.dryrun(app, "local_cwd")
    role = app.roles[0]
    assert role.port_map == {"http": 6007}
    assert role.args[:4] == ["-m", "anylaunch.apps.utils.process_monitor", "--timeout", "5.0"]
    assert "tensorboard" in str(info)
    from anylaunch.components.metrics import tensorboard

    with pytest.raises(InvalidSpecError, match=r"tensorboard\.port"):
        tensorboard("/tmp/logs", port=70000)
    with pytest.raises(InvalidSpecError, match=r"tensorboard\.timeout"):
        tensorboard("/tmp/logs", timeout=float("inf"))
    with pytest.raises(InvalidSpecError, match=r"tensorboard\.logdir"):
        tensorboard("")


def _monitor(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "anylaunch.apps.utils.process_monitor", "--poll_interval", "0.1", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_the_process_monitor_starts_and_stops_the_service_on_its_files(tmp_path: Path) -> None:
    start, done, alive = tmp_path / "start", tmp_path / "done", tmp_path / "alive"
    service = f"import pathlib, time; pathlib.Path({str(alive)!r}).touch(); time.sleep(600)"
    proc = _monitor(
        "--timeout", "300", "--start_on_file", str(start), "--exit_on_file", str(done),
        "--", PY, "-c", service,
    )  # fmt: skip
    try:
        time.sleep(1.0)
        assert not alive.exists() and proc.poll() is None  # waits for its start file
        start.touch()
        deadline = time.monotonic() + 60
        while not alive.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive.exists()
        done.touch()
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and f"{done} exists, stopping" in out


def test_the_process_monitor_stops_on_timeout_and_passes_an_exit_code_on() -> None:
    timed_out = _monitor("--timeout", "1", "--", PY, "-c", "import time; time.sleep(600)")
    out, _ = timed_out.communicate(timeout=60)
    assert timed_out.returncode == 0 and "timeout of 1.0s reached" in out
    failed = _monitor("--", PY, "-c", "raise SystemExit(7)")
    failed.communicate(timeout=60)
    assert failed.returncode == 7
    bad = _monitor("--timeout", "-1", "--", "true")
    out, _ = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "must be a finite number of seconds > 0" in out
