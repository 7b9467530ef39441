"""The well-known metadata keys every scheduler stamps into a submitted job (TorchX's
``torchx.specs.metadata_keys``, with ``torchx`` read as ``anylaunch``).

These spellings are a wire contract: they are written into each job's native metadata
(Kubernetes labels, Docker labels, AWS tags, the Slurm comment, ...) and whatever reads them
back (dashboards, cost reports, ``anylaunch reap``) joins on the exact strings. Import them
from here instead of spelling them again.

>>> app_metadata.CONTEXT, app_metadata.SCHEDULER
('anylaunch/context', 'anylaunch/scheduler')
>>> ANYLAUNCH_CONTEXT_NAME, NA
('ANYLAUNCH_CONTEXT_NAME', '<<NA>>')
"""

__all__ = ["ANYLAUNCH_CONTEXT_NAME", "NA", "app_metadata"]

#: Env var naming the calling context (e.g. ``cli_run``, a pipeline's name), read at submit
#: time and stamped into the job's metadata as :attr:`app_metadata.CONTEXT`.
ANYLAUNCH_CONTEXT_NAME: str = "ANYLAUNCH_CONTEXT_NAME"

#: Written where a metadata value is not available (e.g. :data:`ANYLAUNCH_CONTEXT_NAME` unset
#: when the job is submitted).
NA: str = "<<NA>>"


class app_metadata:
    """Keys of the app-level metadata the schedulers stamp into every submitted job."""

    CONTEXT: str = "anylaunch/context"
    VERSION: str = "anylaunch/version"
    SCHEDULER: str = "anylaunch/scheduler"

    #: Prefix of per-role keys, ``anylaunch/roles.<role name>...``. Reserved: no scheduler
    #: stamps per-role keys yet (role names may hold ``.``, which would make them ambiguous).
    ROLES_PREFIX: str = "anylaunch/roles."
