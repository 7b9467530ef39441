"""``.anylaunchconfig`` lookup and loading as TorchX's ``runner/config.py`` documents them.

Lookup: ``$ANYLAUNCHCONFIG`` wins even over ``dirs``; an empty value reads no file; a missing
named file is a FileNotFoundError; without dirs, ``$HOME`` overlays the current directory.
Loading: an unknown key is warned about and skipped (unless it looks misspelt), one option
under two spellings must agree, and ``dump`` pre-fills optional options with their defaults.

Schedulers come from the real registry: ``local_cwd``, and a plugin distribution installed
into a temporary sys.path entry (one with a required option).
"""

from __future__ import annotations

import configparser
import io
import logging
import os
from pathlib import Path

import pytest

from anylaunch.runner.config import (
    CONFIG_FILE,
    ENV_ANYLAUNCHCONFIG,
    ConfigFileNotFoundError,
    InvalidConfigFileError,
    apply,
    dump,
    find_configs,
    get_config,
    load,
    load_sections,
)
from anylaunch.schedulers import get_scheduler_factory
from anylaunch.specs import CfgVal, InvalidRunConfigException, InvalidSpecError, runopts

PLUGIN_MODULE = """
from anylaunch.schedulers.api import Scheduler
from anylaunch.specs import runopts


class ParityScheduler(Scheduler):
    def __init__(self, session_name):
        super().__init__("cfgparity", session_name)

    def _run_opts(self):
        opts = runopts()
        opts.add("queue", type_=str, required=True, help="queue to submit to")
        opts.add("priority", type_=int, default=1, help="job priority")
        opts.add("tags", type_=list[str], default=["a", "b"], help="tags")
        opts.add("empty_tags", type_=list[str], default=[], help="no tags by default")
        opts.add("labels", type_=dict[str, str], default={"team": "ml"}, help="labels")
        opts.add("odd", type_=list[str], default=["x;y"], help="a default no file can hold")
        opts.add("ratio", type_=float, default=0.5, help="a float")
        opts.add("account", type_=str, help="billing account")
        return opts

    def _submit_dryrun(self, app, cfg):
        raise NotImplementedError

    def schedule(self, dryrun_info):
        raise NotImplementedError

    def describe(self, app_id):
        return None

    def list(self, cfg=None):
        return []

    def _cancel_existing(self, app_id):
        pass


def create_scheduler(session_name, **kwargs):
    return ParityScheduler(session_name)
"""


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty HOME and CWD, no $ANYLAUNCHCONFIG, and the cfgparity plugin installed."""
    home, cwd, site = tmp_path / "home", tmp_path / "cwd", tmp_path / "site"
    for d in (home, cwd, site):
        d.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(ENV_ANYLAUNCHCONFIG, raising=False)
    (site / "cfgparity_plugin.py").write_text(PLUGIN_MODULE)
    dist = site / "cfgparity_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cfgparity-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[anylaunch.schedulers]\ncfgparity = cfgparity_plugin:create_scheduler\n"
    )
    monkeypatch.syspath_prepend(str(site))


def write(directory: Path, text: str) -> str:
    path = directory / CONFIG_FILE
    path.write_text(text)
    return str(path)


def home() -> Path:
    return Path(os.environ["HOME"])


def local_cwd_opts() -> runopts:
    sched = get_scheduler_factory("local_cwd")("_")
    try:
        return sched.run_opts()
    finally:
        sched.close()


# --- which files -----------------------------------------------------------------------------


def test_env_var_wins_even_when_dirs_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    write(project, "[local_cwd]\nlog_dir = /from/dirs\n")
    named = tmp_path / "named.ini"
    named.write_text("[local_cwd]\nlog_dir = /from/env\n[component:utils.echo]\nmsg = env\n")
    monkeypatch.setenv(ENV_ANYLAUNCHCONFIG, str(named))
    assert find_configs(dirs=[str(project)]) == [str(named)]
    cfg: dict[str, CfgVal] = {}
    apply("local_cwd", cfg, dirs=[str(project)])
    assert cfg == {"log_dir": "/from/env"}
    assert load_sections("component", dirs=[str(project)]) == {"utils.echo": {"msg": "env"}}


def test_empty_env_var_reads_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(home(), "[local_cwd]\nlog_dir = /home\n[cli:run]\nscheduler = local_cwd\n")
    write(Path.cwd(), "[local_cwd]\nprepend_cwd = true\n")
    assert len(find_configs()) == 2
    monkeypatch.setenv(ENV_ANYLAUNCHCONFIG, "")
    assert find_configs() == [] and find_configs(dirs=[str(home())]) == []
    cfg: dict[str, CfgVal] = {}
    apply("local_cwd", cfg)
    assert cfg == {}
    assert get_config("cli", "run", "scheduler") is None


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_env_var_naming_no_file_is_a_file_not_found_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    target = tmp_path / "nope.ini"
    if kind == "directory":
        target.mkdir()
    write(Path.cwd(), "[local_cwd]\nlog_dir = /cwd\n")
    monkeypatch.setenv(ENV_ANYLAUNCHCONFIG, str(target))
    with pytest.raises(FileNotFoundError) as err:
        find_configs(dirs=[str(Path.cwd())])
    assert isinstance(err.value, ConfigFileNotFoundError)
    assert isinstance(err.value, InvalidSpecError)  # one line at the CLI, like other input
    assert str(target) in str(err.value) and ENV_ANYLAUNCHCONFIG in str(err.value)
    with pytest.raises(FileNotFoundError):
        apply("local_cwd", {})


def test_home_overlays_cwd_and_explicit_wins_over_both() -> None:
    home_file = write(home(), "[local_cwd]\nlog_dir = /home\n")
    cwd_file = write(Path.cwd(), "[local_cwd]\nlog_dir = /cwd\nprepend_cwd = true\n")
    assert find_configs() == [home_file, cwd_file]
    assert find_configs(dirs=[]) == [home_file, cwd_file]  # empty dirs: the default dirs
    cfg: dict[str, CfgVal] = {}
    apply("local_cwd", cfg)
    assert cfg == {"log_dir": "/home", "prepend_cwd": True}
    explicit: dict[str, CfgVal] = {"logDir": "/explicit"}
    apply("local_cwd", explicit)
    assert explicit == {"logDir": "/explicit", "prepend_cwd": True}
    # what no file sets keeps the scheduler's default
    resolved = local_cwd_opts().resolve(explicit)
    assert resolved["log_dir"] == "/explicit" and resolved["cancel_grace_s"] == 5.0


def test_home_overlays_cwd_for_component_and_cli_sections() -> None:
    write(home(), "[component:dist.ddp]\nj = 1x1\n[cli:run]\nscheduler = local_cwd\n")
    write(Path.cwd(), "[component:dist.ddp]\nj = 2x4\nimage = cwd-image\n")
    assert load_sections("component") == {"dist.ddp": {"j": "1x1", "image": "cwd-image"}}
    assert get_config("cli", "run", "scheduler") == "local_cwd"


def test_dirs_are_read_in_the_order_given(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write(first, "[local_cwd]\nlog_dir = /first\n")
    write(second, "[local_cwd]\nlog_dir = /second\nprepend_cwd = yes\n")
    write(home(), "[local_cwd]\ncancel_grace_s = 9\n")  # not read: dirs were given
    cfg: dict[str, CfgVal] = {}
    apply("local_cwd", cfg, dirs=[str(first), str(tmp_path / "none"), str(second)])
    assert cfg == {"log_dir": "/first", "prepend_cwd": True}


# --- unknown and conflicting keys ------------------------------------------------------------


def test_an_unknown_key_is_warned_about_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    path = write(Path.cwd(), "[local_cwd]\nvpc_token = hunter2-secret\nlog_dir = /logs\n")
    cfg: dict[str, CfgVal] = {}
    with caplog.at_level(logging.WARNING, logger="anylaunch.runner.config"):
        apply("local_cwd", cfg)
    assert cfg == {"log_dir": "/logs"}
    [record] = [r for r in caplog.records if "vpc_token" in r.getMessage()]
    message = record.getMessage()
    assert path in message and "[local_cwd]" in message and "log_dir" in message
    assert "hunter2-secret" not in caplog.text  # a value may be a credential


def test_a_misspelt_key_is_an_error_that_hides_the_value() -> None:
    path = write(Path.cwd(), "[local_cwd]\nlog_dri = /secret-path-xyz\n")
    with pytest.raises(InvalidConfigFileError) as err:
        apply("local_cwd", {})
    assert (err.value.path, err.value.section, err.value.key) == (path, "local_cwd", "log_dri")
    assert "Did you mean 'log_dir'?" in str(err.value)
    assert "/secret-path-xyz" not in str(err.value)


def test_an_upper_case_key_is_the_option_it_spells() -> None:
    # specs.cases reads LOG_DIR as log_dir (as runopts.get does): the value is not lost
    write(Path.cwd(), "[local_cwd]\nLOG_DIR = /x\n")
    cfg: dict[str, CfgVal] = {}
    apply("local_cwd", cfg)
    assert cfg == {"log_dir": "/x"}


def test_two_spellings_of_one_option_must_agree() -> None:
    write(Path.cwd(), "[local_cwd]\nlog_dir = /a\nlogDir = /b\n")
    with pytest.raises(InvalidRunConfigException) as err:
        apply("local_cwd", {})
    assert isinstance(err.value, InvalidConfigFileError) and err.value.key == "logDir"
    assert "/a" not in str(err.value) and "/b" not in str(err.value)
    # an explicit value makes the file's spellings moot
    cfg: dict[str, CfgVal] = {"log_dir": "/explicit"}
    apply("local_cwd", cfg)
    assert cfg == {"log_dir": "/explicit"}

    write(Path.cwd(), "[local_cwd]\nprepend_cwd = true\nprependCwd = yes\n")  # same value
    cfg = {}
    apply("local_cwd", cfg)
    assert cfg == {"prepend_cwd": True}


@pytest.mark.parametrize("placeholder", ["FIXME", "#FIXME:(str) queue to submit to"])
def test_a_placeholder_left_in_the_file_is_an_error(placeholder: str) -> None:
    write(Path.cwd(), f"[cfgparity]\nqueue = {placeholder}\n")
    with pytest.raises(InvalidConfigFileError) as err:
        apply("cfgparity", {})
    assert err.value.key == "queue" and "FIXME" in str(err.value)


# --- the template ----------------------------------------------------------------------------


def _items(text: str, section: str) -> dict[str, str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return dict(parser.items(section))


def test_dump_prefills_optional_options_with_their_defaults(tmp_path: Path) -> None:
    out = io.StringIO()
    dump(out, schedulers=["cfgparity"])
    text = out.getvalue()
    assert _items(text, "cfgparity") == {
        "archive_url": "None",  # the option every scheduler takes
        "queue": "FIXME",
        "account": "None",
        "empty_tags": "None",
        "labels": "team:ml",
        "priority": "1",
        "ratio": "0.5",
        "tags": "a;b",
    }
    assert "# odd = " in text  # ["x;y"] cannot be written as a value: left to the default
    assert "# queue (str, required): queue to submit to" in text

    # the template loads back to exactly the defaults once the FIXME is filled
    path = write(tmp_path, text.replace("queue = FIXME", "queue = q1"))
    cfg: dict[str, CfgVal] = {}
    apply("cfgparity", cfg, dirs=[str(Path(path).parent)])
    sched = get_scheduler_factory("cfgparity")("_")
    opts = sched.run_opts()
    defaults = {name: opt.default for name, opt in opts}
    assert opts.resolve(cfg) == {**defaults, "queue": "q1"}


def test_dump_of_local_cwd_loads_back_to_its_defaults() -> None:
    out = io.StringIO()
    dump(out, schedulers=["local_cwd"])
    cfg: dict[str, CfgVal] = {}
    load("local_cwd", io.StringIO(out.getvalue()), cfg)
    opts = local_cwd_opts()
    assert set(cfg) == {name for name, _ in opts}
    assert opts.resolve(cfg) == opts.resolve({})


def test_dump_required_only_writes_only_the_placeholders() -> None:
    out = io.StringIO()
    dump(out, schedulers=["cfgparity"], required_only=True)
    assert _items(out.getvalue(), "cfgparity") == {"queue": "FIXME"}


def test_dump_rejects_a_bare_scheduler_string() -> None:
    out = io.StringIO()
    with pytest.raises(InvalidSpecError, match="schedulers"):
        dump(out, schedulers="local_cwd")
    with pytest.raises(ValueError, match="unknown scheduler"):
        dump(out, schedulers=["local_cwdd"])
    assert out.getvalue() == ""
