"""Placeholder values of the spec data model (TorchX's ``MISSING``, ``NONE``, ``ALL``)."""

__all__ = ["ALL", "MISSING", "NONE"]

#: Placeholder for a value that was never set.
MISSING: str = "<MISSING>"
#: Placeholder for "no value" in string fields (e.g. no structured error).
NONE: str = "<NONE>"
#: Matches every scheduler backend (TorchX's ``"all"``, its ``"*"`` backend).
ALL: str = "all"
