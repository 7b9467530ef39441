"""What TorchX users patch in ``runner.config`` (``DEFAULT_CONFIG_DIRS``,
``get_scheduler_factories``) exists under TorchX's names and changes what is read."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

from anylaunch.runner import config
from anylaunch.schedulers.api import Scheduler
from anylaunch.schedulers.local_scheduler import create_scheduler as create_local
from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException
from anylaunch.specs.runopts import runopts


@pytest.fixture(autouse=True)
def _no_env_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.ENV_ANYLAUNCHCONFIG, raising=False)


def _write(d: Path, text: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    path = d / config.CONFIG_FILE
    path.write_text(text)
    return path


def test_default_config_dirs_is_home_then_cwd_at_import() -> None:
    # as in TorchX: [$HOME, $CWD] as they were when the module was imported
    dirs = config.DEFAULT_CONFIG_DIRS
    assert isinstance(dirs, list) and len(dirs) == 2
    assert all(isinstance(d, str) and os.path.isabs(d) for d in dirs)


def test_replacing_default_config_dirs_changes_where_files_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _write(tmp_path / "proj", "[local_cwd]\nlog_dir = /from/patched\n")
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", [str(tmp_path / "proj")])
    assert config.find_configs() == [str(found)]
    cfg: dict[str, Any] = {}
    config.apply("local_cwd", cfg)
    assert cfg["log_dir"] == "/from/patched"


def test_editing_default_config_dirs_in_place_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _write(tmp_path / "edited", "[local_cwd]\n")
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", config.DEFAULT_CONFIG_DIRS)  # restored
    saved = list(config.DEFAULT_CONFIG_DIRS)
    try:
        config.DEFAULT_CONFIG_DIRS[:] = [str(tmp_path / "edited")]
        assert config.find_configs() == [str(found)]
    finally:
        config.DEFAULT_CONFIG_DIRS[:] = saved


def test_untouched_default_config_dirs_follow_a_later_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    found = _write(tmp_path / "later", "[local_cwd]\n")
    monkeypatch.chdir(tmp_path / "later")
    assert config.find_configs() == [str(found)]


def test_default_config_dirs_set_to_a_str_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "DEFAULT_CONFIG_DIRS", "/one/dir")
    with pytest.raises(InvalidSpecError) as err:
        config.find_configs()
    assert "DEFAULT_CONFIG_DIRS" in err.value.field and "['/one/dir']" in err.value.fix


class _OnlyQueue(Scheduler[Any]):
    """A scheduler whose one run option is ``queue`` (only its run_opts are used here)."""

    def __init__(self, session_name: str) -> None:
        super().__init__("only_queue", session_name)

    def run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=int, default=1, help="which queue")
        return opts

    def schedule(self, dryrun_info: Any) -> str:
        raise AssertionError("not used")

    def _submit_dryrun(self, app: Any, cfg: Any) -> Any:
        raise AssertionError("not used")

    def describe(self, app_id: str) -> Any:
        return None

    def _cancel_existing(self, app_id: str) -> None:
        pass

    def list(self, cfg: Any = None) -> list[Any]:
        return []


def _only_queue_factories() -> dict[str, Any]:
    return {"local_cwd": create_local, "mine": _OnlyQueue}


def test_patched_scheduler_factory_lookup_is_the_one_loading_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path / "p", "[mine]\nqueue = 7\n")
    monkeypatch.setattr(config, "get_scheduler_factories", _only_queue_factories)
    cfg: dict[str, Any] = {}
    config.apply("mine", cfg, dirs=[str(tmp_path / "p")])
    assert cfg == {"queue": 7}  # cast with the patched scheduler's runopts
    assert isinstance(config._get_scheduler("mine"), _OnlyQueue)
    with pytest.raises(UnknownSchedulerException, match="Did you mean 'mine'"):
        config._get_scheduler("mien")


def test_patched_scheduler_factory_lookup_is_the_one_dump_uses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(config, "get_scheduler_factories", _only_queue_factories)
    out = io.StringIO()
    config.dump(out, schedulers=["mine"])
    assert "[mine]" in out.getvalue() and "queue = 1" in out.getvalue()
    everything = io.StringIO()
    config.dump(everything)
    assert "[local_cwd]" in everything.getvalue() and "[slurm]" not in everything.getvalue()
    with pytest.raises(UnknownSchedulerException):
        config.dump(io.StringIO(), schedulers=["slurm"])


def test_unknown_sections_are_judged_by_the_patched_lookup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path / "p", "[local_cwd]\n[slurm]\npartition = x\n")
    monkeypatch.setattr(config, "get_scheduler_factories", _only_queue_factories)
    config.apply("local_cwd", {}, dirs=[str(tmp_path / "p")])
    assert "section [slurm] names no scheduler" in caplog.text


def test_config_file_name_patch_is_honoured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config, "CONFIG_FILE", ".otherconfig")
    (tmp_path / ".otherconfig").write_text("[local_cwd]\n")
    assert config.find_configs(dirs=[str(tmp_path)]) == [os.path.join(tmp_path, ".otherconfig")]
