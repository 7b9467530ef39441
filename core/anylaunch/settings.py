"""The names of the environment variables anylaunch reads or sets (TorchX's
``torchx.settings``, with ``TORCHX`` read as ``ANYLAUNCH``).

The one definition of each: the modules that use them import them from here (e.g.
:data:`anylaunch.tracker.api.ENV_ANYLAUNCH_JOB_ID`); this module imports nothing.

>>> ENV_ANYLAUNCH_JOB_ID  # set in a job anylaunch launched, to its app handle
'ANYLAUNCH_JOB_ID'
"""

__all__ = [
    "ANYLAUNCH_INTERNAL_SESSION_ID",
    "ENV_ANYLAUNCHCONFIG",
    "ENV_ANYLAUNCH_IMAGE",
    "ENV_ANYLAUNCH_JOB_ID",
    "ENV_ANYLAUNCH_PARENT_RUN_ID",
    "ENV_ANYLAUNCH_TRACKERS",
]

#: In a job: the tracker factories to build, comma-separated; in a launcher: overrides the
#: ``[anylaunch:tracker]`` names (see :mod:`anylaunch.tracker`).
ENV_ANYLAUNCH_TRACKERS: str = "ANYLAUNCH_TRACKERS"
#: Injected into every role when a parent run id is given (or set in the launcher's env).
ENV_ANYLAUNCH_PARENT_RUN_ID: str = "ANYLAUNCH_PARENT_RUN_ID"
#: Injected into every role: the app's own handle.
ENV_ANYLAUNCH_JOB_ID: str = "ANYLAUNCH_JOB_ID"
#: The only ``.anylaunchconfig`` file to read (empty: none); see :mod:`anylaunch.runner.config`.
ENV_ANYLAUNCHCONFIG: str = "ANYLAUNCHCONFIG"
#: TorchX's name for the variable holding a process's TorchX session id. anylaunch defines it
#: for code ported from TorchX but neither sets nor reads it: a job is identified by
#: :data:`ENV_ANYLAUNCH_JOB_ID`.
ANYLAUNCH_INTERNAL_SESSION_ID: str = "ANYLAUNCH_INTERNAL_SESSION_ID"
#: TorchX's name for the variable overriding the default image. anylaunch defines it for code
#: ported from TorchX but does not read it: the default image is
#: :data:`anylaunch.version.ANYLAUNCH_IMAGE`.
ENV_ANYLAUNCH_IMAGE: str = "ANYLAUNCH_IMAGE"
