""".anylaunchconfig: lookup order, precedence, casting, errors and the `configure` template.

Schedulers come from the real registry: a plugin distribution (dist-info + entry point) is
installed into a temporary sys.path entry, the way a third-party scheduler package would be.
"""

from __future__ import annotations

import configparser
import io
import os
import textwrap
from pathlib import Path

import pytest

from anylaunch.runner.config import (
    CONFIG_FILE,
    ENV_ANYLAUNCHCONFIG,
    InvalidConfigFileError,
    apply,
    dump,
    find_configs,
    get_config,
    get_configs,
    load,
    load_sections,
)
from anylaunch.schedulers import get_scheduler_factories
from anylaunch.specs import CfgVal, InvalidSpecError, UnknownSchedulerException, runopts

PLUGIN_MODULE = """
from collections.abc import Mapping
from anylaunch.schedulers.api import Scheduler
from anylaunch.specs import runopts


class CfgTestScheduler(Scheduler[Mapping[str, object]]):
    def __init__(self, session_name: str) -> None:
        super().__init__("cfgtest", session_name)

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=str, required=True, help="queue to submit to")
        opts.add("priority", type_=int, default=1, help="job priority")
        opts.add("tags", type_=list[str], default=["a", "b"], help="tags")
        opts.add("labels", type_=dict[str, str], default={"team": "ml", "tier": "1"}, help="labels")
        opts.add("preemptible", type_=bool, default=False, help="may be preempted")
        opts.add("account", type_=str, help="billing account\\n(optional)")
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
    return CfgTestScheduler(session_name)
"""

DEFAULTS: dict[str, CfgVal] = {
    "priority": 1,
    "tags": ["a", "b"],
    "labels": {"team": "ml", "tier": "1"},
    "preemptible": False,
    "account": None,
}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty HOME and CWD, no $ANYLAUNCHCONFIG, and the cfgtest plugin installed."""
    home, cwd, site = tmp_path / "home", tmp_path / "cwd", tmp_path / "site"
    for d in (home, cwd, site):
        d.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.delenv(ENV_ANYLAUNCHCONFIG, raising=False)

    (site / "cfgtest_plugin.py").write_text(PLUGIN_MODULE)
    (site / "cfgtest_broken.py").write_text("import no_such_sdk_for_anylaunch_tests\n")
    dist = site / "cfgtest_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cfgtest-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[anylaunch.schedulers]\n"
        "cfgtest = cfgtest_plugin:create_scheduler\n"
        "cfgbroken = cfgtest_broken:create_scheduler\n"
    )
    monkeypatch.syspath_prepend(str(site))


def write(directory: Path | str, text: str) -> Path:
    path = Path(directory) / CONFIG_FILE
    path.write_text(textwrap.dedent(text))
    return path


def home() -> Path:
    return Path(os.environ["HOME"])


def test_plugin_is_registered() -> None:
    assert {"cfgtest", "cfgbroken"} <= set(get_scheduler_factories())


# --- lookup --------------------------------------------------------------------------------


def test_find_configs_reads_home_then_cwd() -> None:
    # TorchX's documented default dirs, [$HOME, $CWD]; the first file read wins
    assert find_configs() == []
    home_file = write(home(), "[cfgtest]\n")
    assert find_configs() == [str(home_file)]
    cwd_file = write(Path.cwd(), "[cfgtest]\n")
    assert find_configs() == [str(home_file), str(cwd_file)]


def test_home_equal_to_cwd_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(Path.cwd()))
    write(Path.cwd(), "[cfgtest]\npriority = 4\n")
    assert len(find_configs()) == 1


def test_env_var_names_the_only_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(home(), "[cfgtest]\npriority = 2\n")
    write(Path.cwd(), "[cfgtest]\npriority = 3\n")
    only = tmp_path / "only.ini"
    only.write_text("[cfgtest]\npriority = 9\n")
    monkeypatch.setenv(ENV_ANYLAUNCHCONFIG, str(only))
    assert find_configs() == [str(only)]
    cfg: dict[str, CfgVal] = {}
    apply("cfgtest", cfg)
    assert cfg == {"priority": 9}

    monkeypatch.setenv(ENV_ANYLAUNCHCONFIG, os.devnull)  # read no file at all
    cfg = {}
    apply("cfgtest", cfg)
    assert cfg == {}

    # the environment wins even over explicit dirs (TorchX's rule)
    assert find_configs(dirs=[str(Path.cwd())]) == [os.devnull]

    monkeypatch.setenv(ENV_ANYLAUNCHCONFIG, str(tmp_path / "missing.ini"))
    with pytest.raises(InvalidConfigFileError) as err:
        find_configs()
    assert "missing.ini" in str(err.value) and ENV_ANYLAUNCHCONFIG in str(err.value)


def test_dirs_must_be_a_list() -> None:
    with pytest.raises(InvalidSpecError):
        find_configs(dirs="/tmp")


# --- precedence and casting ----------------------------------------------------------------


def test_precedence_explicit_over_home_over_cwd() -> None:
    write(home(), "[cfgtest]\nqueue = home-q\npriority = 2\npreemptible = true\n")
    write(Path.cwd(), "[cfgtest]\nqueue = cwd-q\ntags = x;y\n")
    cfg: dict[str, CfgVal] = {"priority": 7}
    apply("cfgtest", cfg)
    assert cfg == {"priority": 7, "queue": "home-q", "preemptible": True, "tags": ["x", "y"]}


def test_camel_case_explicit_keys_win_over_snake_case_file_keys() -> None:
    opts = runopts()
    opts.add("max_retries", type_=int, default=0, help="retries")
    opts.add("preemptible", type_=bool, default=False, help="p")
    write(Path.cwd(), "[cfgtest]\nmax_retries = 1\npreemptible = yes\n")
    cfg: dict[str, CfgVal] = {"maxRetries": 3}
    apply("cfgtest", cfg, opts=opts)
    assert cfg == {"maxRetries": 3, "preemptible": True}
    assert opts.resolve(cfg) == {"max_retries": 3, "preemptible": True}


def test_none_or_empty_value_unsets_and_blocks_lower_files() -> None:
    write(Path.cwd(), "[cfgtest]\naccount = billing\npriority = 3\n")
    write(home(), "[cfgtest]\naccount = None\npriority =\n")
    cfg: dict[str, CfgVal] = {}
    apply("cfgtest", cfg)
    assert cfg == {"account": None, "priority": None}


def test_dict_and_list_values_cast_like_the_cli() -> None:
    write(Path.cwd(), "[cfgtest]\nlabels = a:1,b:2\ntags = p,q\n")
    cfg: dict[str, CfgVal] = {}
    apply("cfgtest", cfg)
    assert cfg == {"labels": {"a": "1", "b": "2"}, "tags": ["p", "q"]}


def test_percent_signs_and_other_sections_are_literal() -> None:
    write(
        Path.cwd(),
        """
        [DEFAULT]
        priority = 8
        [cfgtest]
        account = 100%% sure %(x)s
        """,
    )
    cfg: dict[str, CfgVal] = {}
    apply("cfgtest", cfg)
    # no interpolation, and a [DEFAULT] section does not leak into scheduler sections
    assert cfg == {"account": "100%% sure %(x)s"}


# --- errors --------------------------------------------------------------------------------


def test_unknown_option_names_file_section_and_key() -> None:
    path = write(Path.cwd(), "[cfgtest]\npriorty = 2\n")
    with pytest.raises(InvalidConfigFileError) as err:
        apply("cfgtest", {})
    e = err.value
    assert (e.path, e.section, e.key) == (str(path), "cfgtest", "priorty")
    assert f"{path}[cfgtest].priorty" in str(e) and "Did you mean 'priority'?" in str(e)


def test_uncastable_value_names_the_key() -> None:
    write(Path.cwd(), "[cfgtest]\npriority = high\n")
    with pytest.raises(InvalidConfigFileError) as err:
        apply("cfgtest", {})
    assert err.value.key == "priority" and "'high'" in str(err.value)


@pytest.mark.parametrize(
    "text",
    [
        "priority = 2\n",  # no section header
        "[cfgtest]\npriority = 2\npriority = 3\n",  # duplicate key
        "[cfgtest]\n[cfgtest]\n",  # duplicate section
        "[cfgtest\n",  # broken header
    ],
)
def test_malformed_file_names_the_file(text: str) -> None:
    path = write(Path.cwd(), text)
    with pytest.raises(InvalidConfigFileError) as err:
        apply("cfgtest", {})
    assert err.value.path == str(path)
    assert "not a valid INI file" in str(err.value)
    with pytest.raises(InvalidConfigFileError):
        get_configs("component", "x")


def test_only_the_requested_scheduler_section_is_validated() -> None:
    write(Path.cwd(), "[cfgtest]\nqueue = FIXME\n[other]\nwhatever = 1\n")
    cfg: dict[str, CfgVal] = {"queue": "explicit"}
    apply("cfgtest", cfg)  # FIXME is never read: the explicit value wins
    assert cfg == {"queue": "explicit"}
    cfg = {}
    with pytest.raises(InvalidConfigFileError) as err:
        apply("cfgtest", cfg)
    assert err.value.key == "queue" and "FIXME" in str(err.value)


def test_unknown_scheduler_section_lookup_fails_clearly() -> None:
    write(Path.cwd(), "[cfgtets]\nqueue = q\n")
    with pytest.raises(UnknownSchedulerException) as err:
        apply("cfgtets", {})
    assert "Did you mean 'cfgtest'?" in str(err.value)


def test_apply_validates_its_arguments() -> None:
    with pytest.raises(InvalidSpecError):
        apply("", {})
    with pytest.raises(InvalidSpecError):
        apply("cfgtest", [])  # type: ignore[arg-type]


def test_load_from_an_open_file() -> None:
    cfg: dict[str, CfgVal] = {"priority": 4}
    load("cfgtest", io.StringIO("[cfgtest]\npriority = 1\nqueue = q\n"), cfg)
    assert cfg == {"priority": 4, "queue": "q"}
    load("cfgtest", io.StringIO("[elsewhere]\nx = 1\n"), cfg)  # no section: nothing changes
    assert cfg == {"priority": 4, "queue": "q"}


# --- prefixed sections ---------------------------------------------------------------------


def test_component_and_cli_sections_merge_by_precedence() -> None:
    write(
        home(),
        """
        [component:dist.ddp]
        j = 1x1
        image = home-image
        [cli:run]
        scheduler = cfgtest
        """,
    )
    write(
        Path.cwd(),
        """
        [component:dist.ddp]
        j = 2x4
        [component:path/to/file.py:train]
        lr = 0.1
        [component:]
        ignored = 1
        """,
    )
    assert load_sections("component") == {
        "dist.ddp": {"j": "1x1", "image": "home-image"},
        "path/to/file.py:train": {"lr": "0.1"},
    }
    assert get_configs("cli", "run") == {"scheduler": "cfgtest"}
    assert get_config("cli", "run", "scheduler") == "cfgtest"
    assert get_config("cli", "run", "component") is None
    assert get_configs("cli", "nope") == {}
    with pytest.raises(InvalidSpecError):
        get_config("cli", "run", "")


# --- the template --------------------------------------------------------------------------


def _parse(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


def test_dump_required_only() -> None:
    out = io.StringIO()
    dump(out, schedulers=["cfgtest"], required_only=True)
    text = out.getvalue()
    assert "queue = FIXME" in text and "priority" not in text


def test_dump_all_skips_unloadable_schedulers_with_a_comment() -> None:
    out = io.StringIO()
    dump(out)
    text = out.getvalue()
    parsed = _parse(text)
    assert "cfgtest" in parsed.sections()
    assert "cfgbroken" not in parsed.sections()
    assert "# [cfgbroken] skipped:" in text and "no_such_sdk_for_anylaunch_tests" in text
    for name in get_scheduler_factories():
        assert name in parsed.sections() or f"# [{name}] skipped:" in text


def test_dump_unknown_scheduler_fails_before_writing() -> None:
    out = io.StringIO()
    with pytest.raises(UnknownSchedulerException):
        dump(out, schedulers=["cfgtest", "nope"])
    assert out.getvalue() == ""


def test_a_section_naming_no_scheduler_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from anylaunch.runner import config

    (tmp_path / ".anylaunchconfig").write_text(
        "[local_cwdd]\nlog_dir = /x\n[cli:run]\nscheduler = local_cwd\n"
    )
    cfg: dict[str, object] = {}
    with caplog.at_level("WARNING", logger=config.__name__):
        config.apply("local_cwd", cfg, dirs=[str(tmp_path)])
    assert cfg == {}
    [record] = [r for r in caplog.records if "[local_cwdd]" in r.getMessage()]
    assert "Did you mean 'local_cwd'" in record.getMessage()
