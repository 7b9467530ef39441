"""The trackers a launcher configured, and the env that hands them to its jobs.

In ``.anylaunchconfig``, ``[anylaunch:tracker]`` names each tracker and the factory that
builds it (a tracker's registered name, e.g. ``fsspec``, or ``module.path:function``), and
``[tracker:<name>]`` gives its ``config``::

    [anylaunch:tracker]
    fs = fsspec
    mlflow = my_pkg.tracking:create_tracker

    [tracker:fs]
    config = /shared/tracking

In the launcher's environment, ``ANYLAUNCH_TRACKERS=name1,name2`` replaces the names of the
section (each a name of the section or a factory itself; empty: no tracker), and
``ANYLAUNCH_TRACKER_<NAME>_CONFIG`` a tracker's config (see
:func:`~anylaunch.tracker.api.tracker_config_env_var_name`).

The files are read by the runner's config reader, passed in as ``load_sections``
(:func:`anylaunch.runner.config.load_sections`): this package never imports the runner.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from anylaunch.specs.errors import InvalidSpecError, did_you_mean
from anylaunch.tracker.api import ENV_ANYLAUNCH_TRACKERS, tracker_config_env_var_name
from anylaunch.tracker.checks import check_path
from anylaunch.tracker.factories import check_factory

__all__ = ["SectionLoader", "configured_trackers", "tracker_env"]

logger: logging.Logger = logging.getLogger(__name__)

#: ``load_sections(prefix) -> {name: {key: value}}`` of the ``[prefix:name]`` sections.
SectionLoader = Callable[[str], Mapping[str, Mapping[str, str]]]

_KEYS = ("config",)
_warned: set[str] = set()


def _declared(load_sections: SectionLoader | None) -> tuple[dict[str, str], dict[str, str]]:
    """``{name: factory}`` of ``[anylaunch:tracker]`` and ``{name: config}`` of the
    ``[tracker:<name>]`` sections, checked."""
    if load_sections is None:
        return {}, {}
    declared = dict(load_sections("anylaunch").get("tracker", {}))
    for name, factory in declared.items():
        field = f"[anylaunch:tracker] {name}"
        check_factory(f"{field} (the name)", name)
        if not factory.strip():
            raise InvalidSpecError(
                field, factory, "gives no factory", f"write `{name} = fsspec` or `module:function`"
            )
        check_factory(field, factory.strip())
        declared[name] = factory.strip()
    configs: dict[str, str] = {}
    for name, keys in load_sections("tracker").items():
        for key in keys:
            if key not in _KEYS:
                raise InvalidSpecError(
                    f"[tracker:{name}] {key}",
                    "<not shown>",
                    f"is no tracker setting.{did_you_mean(key, _KEYS)}",
                    "a tracker takes one setting: `config = ...`",
                )
        if keys.get("config", "").strip():
            configs[name] = keys["config"].strip()
    return declared, configs


def configured_trackers(
    load_sections: SectionLoader | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """The trackers to pass to jobs (or for ``anylaunch tracker`` to read): ``{factory:
    config}`` in order, from the config files (``load_sections``) and ``environ`` (default:
    this process's).

    >>> configured_trackers(None, {"ANYLAUNCH_TRACKERS": "fsspec",
    ...                            "ANYLAUNCH_TRACKER_FSSPEC_CONFIG": "/shared/tracking"})
    {'fsspec': '/shared/tracking'}
    >>> configured_trackers(None, {})
    {}

    Raises:
        InvalidSpecError: a name or factory is malformed, a section has an unknown key, or two
            trackers share a factory with different configs (a job gets one config per
            factory)
    """
    env = os.environ if environ is None else environ
    declared, configs = _declared(load_sections)
    if ENV_ANYLAUNCH_TRACKERS in env:
        field = ENV_ANYLAUNCH_TRACKERS
        names = [n.strip() for n in env[ENV_ANYLAUNCH_TRACKERS].split(",") if n.strip()]
    else:
        field, names = "[anylaunch:tracker]", list(declared)
    found: dict[str, str | None] = {}
    for name in names:
        factory = check_factory(field, declared.get(name, name))
        config_field = tracker_config_env_var_name(name)
        config = env.get(config_field, "").strip() or None
        if config is None:
            config = configs.get(name)
            config_field = f"[tracker:{name}] config" + ("" if config else f" (or {config_field})")
        if config is not None:
            check_path(config_field, config)  # no NUL, no newline
        if factory in found and found[factory] != config:
            raise InvalidSpecError(
                field,
                name,
                f"uses the factory {factory!r} of another configured tracker with another config",
                "configure one tracker per factory (a job gets one config per factory)",
            )
        found[factory] = config
        _check_here(field, factory, config_field, config)
    return found


def _check_here(field: str, factory: str, config_field: str, config: str | None) -> None:
    """Catches at launch what the job would fail on: a bad root of the built-in fsspec
    tracker; says once when a factory is unknown here (the job may still have it)."""
    from anylaunch.tracker.factories import kind_here

    kind = kind_here(factory)
    if kind == "builtin" and factory == "fsspec":
        from anylaunch.tracker.backend.fsspec import check_root

        check_root(config_field, config)
    elif kind is None and factory not in _warned:
        _warned.add(factory)
        logger.warning(
            "%s: tracker %r is neither built in nor a plugin installed here; the job must "
            "provide it",
            field,
            factory,
        )


def tracker_env(trackers: Mapping[str, str | None]) -> dict[str, str]:
    """The env that hands ``trackers`` (``{factory: config}``) to a job: empty without any.

    >>> tracker_env({"fsspec": "/shared/tracking"})
    {'ANYLAUNCH_TRACKERS': 'fsspec', 'ANYLAUNCH_TRACKER_FSSPEC_CONFIG': '/shared/tracking'}
    """
    if not trackers:
        return {}
    env = {ENV_ANYLAUNCH_TRACKERS: ",".join(trackers)}
    for factory, config in trackers.items():
        if config is not None:
            env[tracker_config_env_var_name(factory)] = config
    return env
