"""anylaunch for Dagster: a resource, ops, an asset factory and a Pipes client that launch
anylaunch apps on any scheduler, stream their logs into the step's log, wait for them, cancel
them when the run is terminated, and reattach to them on re-execution from failure; with
placement ``targets`` (:class:`AnylaunchTarget`) an app runs on the first of several schedulers
that can run it, and is relaunched when the platform loses it.

>>> import dagster_anylaunch
>>> sorted(dagster_anylaunch.__all__)  # doctest: +NORMALIZE_WHITESPACE
['AnylaunchOpConfig', 'AnylaunchResource', 'AnylaunchRun', 'AnylaunchTarget',
 'PipesAnylaunchClient', 'anylaunch_op', 'build_anylaunch_asset', 'build_anylaunch_op']
"""

from dagster_anylaunch._lifecycle import AnylaunchRun
from dagster_anylaunch.assets import build_anylaunch_asset
from dagster_anylaunch.ops import AnylaunchOpConfig, anylaunch_op, build_anylaunch_op
from dagster_anylaunch.pipes import PipesAnylaunchClient
from dagster_anylaunch.placement import AnylaunchTarget
from dagster_anylaunch.resources import AnylaunchResource

__all__ = [
    "AnylaunchOpConfig",
    "AnylaunchResource",
    "AnylaunchRun",
    "AnylaunchTarget",
    "PipesAnylaunchClient",
    "anylaunch_op",
    "build_anylaunch_asset",
    "build_anylaunch_op",
]
