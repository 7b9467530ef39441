"""TorchX's ``ComponentRunner``: runs named components through a :class:`~anylaunch.runner.Runner`
(what ``Runner.run_component`` does), and the trackers a launch passes to its jobs.

>>> with get_component_runner(component_defaults={"utils.echo": {"msg": "hi"}}) as cr:
...     info = cr.dryrun_component("utils.echo", [], "local_cwd")
...     info.app.roles[0].args
['hi']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from anylaunch.schedulers.common.closing import Closing
from anylaunch.specs.errors import InvalidSpecError

if TYPE_CHECKING:
    from anylaunch.runner.api import Runner
    from anylaunch.specs.api import AppDryRunInfo, AppHandle, Workspace
    from anylaunch.specs.runopts import CfgVal

__all__ = ["ComponentRunner", "get_component_runner", "get_configured_trackers"]


def get_configured_trackers() -> dict[str, str | None]:
    """The trackers a launch passes to its jobs, ``{factory: config}``: from
    ``$ANYLAUNCH_TRACKERS`` (and ``$ANYLAUNCH_TRACKER_<NAME>_CONFIG``) when set, otherwise the
    ``[anylaunch:tracker]`` and ``[tracker:NAME]`` sections of ``.anylaunchconfig`` (TorchX's
    ``torchx.runner.api.get_configured_trackers``).

    >>> import os
    >>> os.environ["ANYLAUNCH_TRACKERS"] = "fsspec"
    >>> os.environ["ANYLAUNCH_TRACKER_FSSPEC_CONFIG"] = "/shared/tracking"
    >>> get_configured_trackers()
    {'fsspec': '/shared/tracking'}
    >>> del os.environ["ANYLAUNCH_TRACKERS"], os.environ["ANYLAUNCH_TRACKER_FSSPEC_CONFIG"]

    Raises:
        InvalidSpecError: a tracker name, factory or setting is malformed
    """
    from anylaunch.runner.config import load_sections
    from anylaunch.tracker.config import configured_trackers

    return configured_trackers(load_sections)


class ComponentRunner(Closing):
    """Runs named components (``utils.echo``, ``path/file.py:fn``) through a runner, with
    per-component defaults (TorchX's ``ComponentRunner``). Closing it closes the runner.

    Args:
        runner: the runner that dry-runs and schedules the apps
        component_defaults: component name to ``{param: value}`` defaults, which win over the
            runner's own
    """

    def __init__(
        self,
        runner: Runner,
        component_defaults: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        from anylaunch.runner.api import Runner

        if not isinstance(runner, Runner):
            raise InvalidSpecError(
                "runner", runner, "must be a Runner", "pass anylaunch.runner.get_runner()"
            )
        self._runner = runner
        self._component_defaults = {k: dict(v) for k, v in (component_defaults or {}).items()}

    @property
    def runner(self) -> Runner:
        """The runner this component runner submits through."""
        return self._runner

    def close(self) -> None:
        """Closes the runner (and the schedulers it created)."""
        self._runner.close()

    def dryrun_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, object],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppDryRunInfo[Any]:
        """What :meth:`run_component` would submit (see ``Runner.dryrun_component``)."""
        from anylaunch.runner.components import materialize

        defaults = {**self._runner._component_defaults}
        for name, values in self._component_defaults.items():
            defaults[name] = {**defaults.get(name, {}), **values}
        app = materialize(component, component_args, defaults)
        return self._runner.dryrun(app, scheduler, cfg, workspace, parent_run_id)

    def run_component(
        self,
        component: str,
        component_args: Sequence[str] | Mapping[str, object],
        scheduler: str,
        cfg: Mapping[str, CfgVal] | None = None,
        workspace: str | Workspace | None = None,
        parent_run_id: str | None = None,
    ) -> AppHandle:
        """Materializes ``component`` with ``component_args`` and runs it on ``scheduler``;
        returns the app handle (see ``Runner.run_component``)."""
        info = self.dryrun_component(
            component, component_args, scheduler, cfg, workspace, parent_run_id
        )
        return self._runner.schedule(info)


def get_component_runner(
    name: str | None = None,
    component_defaults: Mapping[str, Mapping[str, str]] | None = None,
    **scheduler_params: Any,
) -> ComponentRunner:
    """A :class:`ComponentRunner` over ``get_runner(name, **scheduler_params)`` (TorchX's
    ``get_component_runner``); use it as a context manager, or close it.

    Args:
        name: session name for the handles (default ``"anylaunch"``)
        component_defaults: component name to ``{param: value}`` defaults
        scheduler_params: keyword arguments passed to every scheduler factory

    Raises:
        InvalidSpecError: a keyword that no scheduler takes
    """
    from anylaunch.runner.api import get_runner

    return ComponentRunner(get_runner(name, **scheduler_params), component_defaults)
