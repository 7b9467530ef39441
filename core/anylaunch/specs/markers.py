"""Placeholder values of the spec data model (TorchX's ``MISSING``, ``NONE``, ``UNKNOWN``, ``ALL``)."""

__all__ = ["ALL", "MISSING", "NONE", "UNKNOWN"]

#: Placeholder for a value that was never set.
MISSING: str = "<MISSING>"
#: Placeholder for "no value" in string fields (e.g. no structured error).
NONE: str = "<NONE>"
#: Placeholder for a value the backend could not tell (TorchX's ``UNKNOWN``; the state of such
#: an app is :attr:`AppState.UNKNOWN <anylaunch.specs.AppState>`).
UNKNOWN: str = "<UNKNOWN>"
#: Matches every scheduler backend (TorchX's ``"all"``, its ``"*"`` backend).
ALL: str = "all"
