"""anylaunch: launch one portable job definition on many schedulers and workflow engines.

Importing the package is cheap: no backend SDK or orchestrator is imported until a scheduler
or integration that needs it is used.
"""

__version__ = "0.1.0"


def __getattr__(name: str) -> str:
    # TorchX's ``torchx.IMAGE``, resolved on first use: the package itself imports nothing
    if name == "IMAGE":
        from anylaunch.version import ANYLAUNCH_IMAGE

        return ANYLAUNCH_IMAGE
    raise AttributeError(f"module 'anylaunch' has no attribute {name!r}")
