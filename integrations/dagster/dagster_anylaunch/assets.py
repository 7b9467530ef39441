"""An asset factory: materializing the asset launches an anylaunch app and reports it.

>>> from anylaunch.components.utils import echo
>>> asset_def = build_anylaunch_asset("greeting", echo(msg="hi"), group_name="demo")
>>> asset_def.key.to_user_string(), "anylaunch" in asset_def.required_resource_keys
('greeting', True)
"""

# No `from __future__ import annotations` here: Dagster reads the `config` parameter's
# annotation at runtime to find the asset's config schema.

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from anylaunch.specs.api import AppDef
from anylaunch.specs.runopts import CfgVal
from dagster_anylaunch.ops import (
    DEFAULT_RESOURCE_KEY,
    AnylaunchOpConfig,
    _default_description,
    _fixed_launch,
)
from dagster_anylaunch.resources import ComponentArgs

__all__ = ["build_anylaunch_asset"]


def build_anylaunch_asset(
    name: str,
    app: AppDef | None = None,
    *,
    component: str | None = None,
    component_args: ComponentArgs | None = None,
    scheduler: str | None = None,
    cfg: Mapping[str, CfgVal] | None = None,
    resource_key: str = DEFAULT_RESOURCE_KEY,
    description: str | None = None,
    targets: Sequence[Any] | None = None,
    **asset_kwargs: Any,
) -> dg.AssetsDefinition:
    """Builds an asset whose materialization launches an app and waits for it.

    The materialization streams the app's logs into the step's log and returns a
    ``MaterializeResult`` with metadata ``handle``, ``final_state``, ``ui_url`` (a URL),
    ``duration_s`` and ``reattached``. A failed, cancelled or timed-out app fails the
    materialization with a ``dagster.Failure`` carrying handle, ui_url, error and the last
    log lines. Config (:class:`~dagster_anylaunch.ops.AnylaunchOpConfig`) can replace the
    component, scheduler and run options at launch time.

    Args:
        name: the asset's name (``key_prefix`` and other ``@asset`` arguments go in
            ``asset_kwargs``)
        app: the AppDef to launch
        component: or a component to launch, e.g. ``utils.echo``
        component_args: the component's arguments, ``["--msg", "hi"]`` or ``{"msg": "hi"}``
        scheduler: replaces the resource's scheduler
        cfg: run options merged over the resource's (config's win)
        resource_key: key of the AnylaunchResource
        description: the asset's description
        targets: place the app on these targets (scheduler names or
            ``{scheduler, cfg, startup_timeout}``) instead of one scheduler; the
            materialization's metadata then has ``anylaunch/placement`` and
            ``anylaunch/attempt``
        asset_kwargs: passed to ``dagster.asset`` (``deps``, ``group_name``, ``key_prefix``,
            ``tags``, ``owners``, ``retry_policy``, ...)
    """
    launch = _fixed_launch(app, component, component_args, scheduler, cfg, resource_key, targets)
    asset_kwargs.setdefault("kinds", {"anylaunch"})

    def _anylaunch_asset(
        context: dg.AssetExecutionContext, config: AnylaunchOpConfig
    ) -> dg.MaterializeResult[Any]:
        return dg.MaterializeResult(metadata=launch(context, config).metadata())

    return dg.asset(
        _anylaunch_asset,
        name=name,
        description=description or _default_description(app, component),
        required_resource_keys={resource_key},
        **asset_kwargs,
    )
