"""Errors of plugin loading and configuration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from anylaunch.specs.errors import AnylaunchError, InvalidSpecError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["InvalidPluginsSourceError", "PluginLoadError"]

#: The environment variable that selects the discovery channels.
PLUGINS_SOURCE_ENV = "ANYLAUNCH_PLUGINS_SOURCE"


class PluginLoadError(AnylaunchError, ImportError):
    """A plugin registered through an entry point failed to import."""

    def __init__(self, entry_point: EntryPoint, error: BaseException) -> None:
        self.entry_point_name = entry_point.name
        super().__init__(
            f"plugin {entry_point.name!r} from entry point {entry_point.value!r} (group "
            f"{entry_point.group!r}) failed to load: {type(error).__name__}: {error}. Fix: "
            "reinstall or repair the distribution that provides it, or uninstall it"
        )


class InvalidPluginsSourceError(InvalidSpecError):
    """``ANYLAUNCH_PLUGINS_SOURCE`` is not one of 0, 1, 2, 3 (a ``ValueError``)."""

    def __init__(self, raw: str) -> None:
        # The valid values are one digit: a longer value may be something pasted by mistake
        # (a token?), so it is described, never echoed.
        shown = raw if len(raw) <= 3 else f"<a value of {len(raw)} characters>"
        super().__init__(
            PLUGINS_SOURCE_ENV,
            shown,
            "must be 0 (no plugins), 1 (anylaunch_plugins namespace only), "
            "2 (entry points only) or 3 (both)",
            f"set {PLUGINS_SOURCE_ENV} to one of 0-3, or unset it for 3",
        )
