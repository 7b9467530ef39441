"""``fulllocal``: local_cwd whose capacity check always says no (a backend that is full right
now), so a placement skips it. A real plugin scheduler (the ``anylaunch_plugins`` namespace
package: no ``__init__.py`` in it): the in-process Airflow tests put this directory on
``sys.path``, the deployment tests on every Airflow process's ``PYTHONPATH``."""

from typing import Any

from anylaunch.plugins import register
from anylaunch.schedulers import Scheduler
from anylaunch.schedulers.common.capacity import CanRun, Capacity
from anylaunch.schedulers.local_scheduler import LocalScheduler


class FullLocal(LocalScheduler):
    """local_cwd that is full: its capacity check always says no."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        super().__init__(session_name, state_dir=kwargs.get("state_dir"))
        self.backend = "fulllocal"

    def _check_capacity(self, app: Any, cfg: Any) -> Capacity:
        return Capacity(CanRun.NO, "every slot is taken", calls=1)


@register.scheduler()
def fulllocal(session_name: str, **kwargs: Any) -> Scheduler[Any]:
    return FullLocal(session_name, **kwargs)
