"""Real Airflow (2.10+ or 3.x) for these tests: a temporary AIRFLOW_HOME with a SQLite DB migrated once,
and two DAG bundles (examples/airflow/dags and ./dags) so ``dag.test()`` can run their DAGs.
What moved between Airflow versions is reached through :class:`AirflowCompat` (fixture
``afc``), so the tests themselves are version-neutral.

The environment is set when this module is imported, before anything imports airflow (which
reads its configuration once); only AIRFLOW_* variables change for the session. Each test
that launches apps gets its own local_cwd state directory (``state_dir``), so it can count
the apps it launched.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_DAGS = REPO / "examples" / "airflow" / "dags"
TEST_DAGS = Path(__file__).resolve().parent / "dags"

_MARKER = "_ANYLAUNCH_AIRFLOW_TEST_HOME"
if _MARKER not in os.environ:  # set once per process (integrations/airflow/... may have)
    _home = tempfile.mkdtemp(prefix="anylaunch-airflow-")
    os.environ[_MARKER] = _home
    os.environ["AIRFLOW_HOME"] = _home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    atexit.register(shutil.rmtree, _home, True)
os.environ["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"] = json.dumps(
    [
        {
            "name": name,
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(path), "refresh_interval": 0},
        }
        for name, path in (("anylaunch-examples", EXAMPLE_DAGS), ("anylaunch-tests", TEST_DAGS))
    ]
)

# Airflow 3.0's dag.test() prints a failed task's traceback through rich, wrapped at the
# terminal width: keep each line whole so the tests can read the exception's text
if importlib.metadata.version("apache-airflow").startswith("3.0."):
    os.environ.setdefault("COLUMNS", "1000")

# the DAG files are loaded by the tests (and by Airflow's bundle parser), not collected
collect_ignore = ["dags", "plugins"]  # plugins: a plugin scheduler the placement tests load


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """Migrates the SQLite metadata DB once per session (~5 s)."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture(autouse=True)
def _keep_signal_handlers() -> Iterator[None]:
    """Airflow's task runner installs a SIGTERM handler; put the previous one back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh local_cwd state directory; apps still running at the end are cancelled."""
    path = tmp_path / "local_cwd"
    monkeypatch.setenv("ANYLAUNCH_LOCAL_STATE_DIR", str(path))
    yield path
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        for app in runner.list("local_cwd"):
            if not app.state.is_terminal():
                runner.cancel(app.app_handle)


def airflow_version() -> tuple[int, int]:
    from airflow_anylaunch._compat import AIRFLOW_VERSION

    return AIRFLOW_VERSION[0], AIRFLOW_VERSION[1]


class AirflowCompat:
    """The test-side imports that differ between Airflow 2.10+, 3.0-3.2 and 3.3+."""

    @property
    def version(self) -> tuple[int, int]:
        return airflow_version()

    @property
    def DAG(self) -> Any:
        try:
            from airflow.sdk import DAG
        except ImportError:  # Airflow 2
            from airflow import DAG  # type: ignore[attr-defined,no-redef,unused-ignore]
        return DAG

    def serde(self) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[str], Any]]:
        """(serialize, deserialize, import_string) as the triggerer uses them."""
        try:
            from airflow.sdk._shared.module_loading import import_string
            from airflow.sdk.serde import deserialize, serialize
        except ImportError:  # Airflow < 3.3
            from airflow.serialization.serde import (  # type: ignore[no-redef,unused-ignore]
                deserialize,
                serialize,
            )
            from airflow.utils.module_loading import (  # type: ignore[no-redef,unused-ignore]
                import_string,
            )
        return serialize, deserialize, import_string

    def redact(self, text: str) -> Any:
        """Airflow's own secrets masker applied to ``text``."""
        import importlib

        for module in (
            "airflow.sdk.log",
            "airflow.sdk.execution_time.secrets_masker",
            "airflow.utils.log.secrets_masker",
        ):
            try:
                return importlib.import_module(module).redact(text)
            except (ImportError, AttributeError):
                continue
        raise AssertionError("no secrets masker in this Airflow")

    @property
    def AirflowNotFoundException(self) -> type[Exception]:
        from airflow_anylaunch._compat import AirflowNotFoundException

        return AirflowNotFoundException

    def task_runtime_hooks(self) -> Any:
        """What a task sees of the providers' hooks (connection type -> hook info)."""
        try:
            from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
        except ImportError:  # Airflow < 3.3: one ProvidersManager
            from airflow.providers_manager import ProvidersManager

            return ProvidersManager().hooks
        return ProvidersManagerTaskRuntime().hooks


@pytest.fixture(scope="session")
def afc() -> AirflowCompat:
    return AirflowCompat()


def _xcom_model() -> Any:
    try:
        from airflow.models.xcom import XComModel
    except ImportError:  # Airflow 2: one XCom class, rows and API
        from airflow.models.xcom import XCom as XComModel  # type: ignore[no-redef,unused-ignore]
    return XComModel


def xcom_value(row: Any) -> Any:
    """The value of an XCom row (Airflow 2's JSON column holds the value itself)."""
    if airflow_version() < (3, 0) and not isinstance(row.value, (bytes, bytearray)):
        return row.value
    return _xcom_model().deserialize_value(row)


@contextlib.contextmanager
def _reschedule_date_as_a_worker_gets_it() -> Iterator[None]:
    """Airflow 3.0's ``dag.test()`` hands a rescheduled sensor its first reschedule date as
    the API's raw JSON string, so the sensor's next poke that finds its condition unmet
    fails in ``BaseSensorOperator.execute``'s ``run_duration()`` with ``TypeError:
    unsupported operand type(s) for -: 'datetime.datetime' and 'str'`` (apache/airflow#58777).

    Why only ``dag.test()``: ``TaskInstanceOperations.get_reschedule_start_date``
    (airflow/sdk/api/client.py) builds ``TaskRescheduleStartDate.model_construct(start_date=
    resp.json())``, skipping validation. A real worker gets that reply through the
    supervisor's socket, whose ``CommsDecoder._from_frame`` (sdk/execution_time/comms.py)
    validates it into an aware datetime; ``dag.test()``'s ``InProcessTestSupervisor.send_msg``
    (sdk/execution_time/supervisor.py) passes the object itself. Airflow 3.3 builds the model
    validated. Here the reply is validated as the worker's decoder does; where Airflow already
    did, validating it again changes nothing.
    """
    if not (3, 0) <= airflow_version() < (3, 3):
        yield
        return
    from airflow.sdk.api.client import TaskInstanceOperations
    from airflow.sdk.execution_time.comms import TaskRescheduleStartDate

    unvalidated = TaskInstanceOperations.get_reschedule_start_date

    def validated(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = unvalidated(self, *args, **kwargs)
        return TaskRescheduleStartDate(start_date=reply.start_date)

    TaskInstanceOperations.get_reschedule_start_date = validated  # type: ignore[method-assign,unused-ignore]
    try:
        yield
    finally:
        TaskInstanceOperations.get_reschedule_start_date = unvalidated  # type: ignore[method-assign,unused-ignore]


class AirflowHelper:
    """Loads DAG files and runs them with ``dag.test()``; reads results from the DB."""

    def load(self, path: Path, dag_id: str) -> Any:
        """The DAG ``dag_id`` of the DAG file ``path``, parsed the way Airflow parses it."""
        try:
            from airflow.dag_processing.dagbag import DagBag
        except ImportError:  # Airflow < 3.3
            from airflow.models.dagbag import DagBag  # type: ignore[no-redef,unused-ignore]

        bag = DagBag(dag_folder=path)
        assert not bag.import_errors, bag.import_errors
        assert dag_id in bag.dags, f"no DAG {dag_id!r} in {path}: {sorted(bag.dags)}"
        return bag.dags[dag_id]

    def test_dag(self, file: str, dag_id: str) -> Any:
        return self.load(TEST_DAGS / file, dag_id)

    def example_dag(self, file: str, dag_id: str) -> Any:
        return self.load(EXAMPLE_DAGS / file, dag_id)

    def run(self, dag: Any, **kwargs: Any) -> Any:
        """Runs ``dag.test()`` and returns the DagRun (a failed task does not raise)."""
        if airflow_version() >= (3, 3):
            return dag.test(**kwargs)
        return self._run_before_3_3(dag, **kwargs)

    def _run_before_3_3(self, dag: Any, **kwargs: Any) -> Any:
        """``dag.test()`` on Airflow < 3.3, made to behave as on 3.3 for these tests: each task
        log record once on stdout (3.0 also copies it to the root logger), with the inline
        trigger's, a task killed or timed out (Airflow 2 re-raises those out of
        ``dag.test()``) ends the run instead of the test, and a sensor in reschedule mode
        reads its first reschedule date as a datetime (see
        :func:`_reschedule_date_as_a_worker_gets_it`)."""
        import logging
        import sys

        # dag.test() adds a stdout handler to the task logger unless it has one: give it one
        # bound to this test's stdout (not an earlier test's capture), naming the logger as
        # Airflow 3's records do; the trigger runs inline with its records on the root logger
        # (WARNING after the DB migration): show them there too, as Airflow 3 does
        task_log = logging.getLogger("airflow.task")
        trigger_log = logging.getLogger("airflow_anylaunch.triggers")
        for handler in list(task_log.handlers):
            if type(handler) is logging.StreamHandler:
                task_log.removeHandler(handler)
        handler = logging.StreamHandler(sys.stdout)
        handler.setLevel(logging.INFO)
        handler.setFormatter(
            logging.Formatter("[%(asctime)s] {%(name)s} %(levelname)s - %(message)s")
        )
        task_log.addHandler(handler)
        trigger_log.addHandler(handler)
        trigger_log.setLevel(logging.INFO)
        propagate = task_log.propagate, trigger_log.propagate
        task_log.propagate = trigger_log.propagate = False
        try:
            with _reschedule_date_as_a_worker_gets_it():
                return dag.test(**kwargs)
        except BaseException as e:
            if type(e).__name__ not in ("AirflowTaskTerminated", "AirflowTaskTimeout"):
                raise
            from airflow.models.dagrun import DagRun

            runs = DagRun.find(dag_id=dag.dag_id)
            return max(runs, key=lambda run: run.id)
        finally:
            task_log.propagate, trigger_log.propagate = propagate
            task_log.removeHandler(handler)
            trigger_log.removeHandler(handler)

    @staticmethod
    def without_airflow_debug(out: str) -> str:
        """``out`` without the lines only Airflow 3.0's ``dag.test()`` prints: its debug
        records of the task's requests (the values it is told to mask and the raw rendered
        fields included) and the failure's traceback drawn in a box with the frames' local
        variables. Airflow's own lines, not ours; other versions print neither."""
        return "\n".join(
            line
            for line in out.splitlines()
            if "[debug" not in line and not line.startswith(("│", "╭", "╰"))
        )

    def tis(self, dagrun: Any) -> dict[str, Any]:
        """task_id -> TaskInstance of a finished run, fresh from the DB."""
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            found = session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dagrun.dag_id, TaskInstance.run_id == dagrun.run_id
                )
            ).all()
            for ti in found:
                session.expunge(ti)
        return {ti.task_id: ti for ti in found}

    def states(self, dagrun: Any) -> dict[str, str]:
        return {task_id: str(ti.state) for task_id, ti in self.tis(dagrun).items()}

    def reschedules(self, ti: Any) -> int:
        """How many times a task instance was rescheduled (a sensor in reschedule mode)."""
        from airflow.models.taskreschedule import TaskReschedule
        from airflow.utils.session import create_session
        from sqlalchemy import func, select

        where: Any = (
            [TaskReschedule.ti_id == ti.id]
            if hasattr(TaskReschedule, "ti_id")
            else [  # Airflow 2: keyed by the task instance's columns
                TaskReschedule.dag_id == ti.dag_id,
                TaskReschedule.run_id == ti.run_id,
                TaskReschedule.task_id == ti.task_id,
                TaskReschedule.map_index == ti.map_index,
            ]
        )
        with create_session() as session:
            count = session.scalar(select(func.count()).select_from(TaskReschedule).where(*where))
        return int(count or 0)

    def app_link(self, dag: Any, dagrun: Any, task_id: str) -> Any:
        """The "anylaunch app" extra link of a finished task, as Airflow shows it: Airflow 3's
        task runner stores its links in XCom when the task ends; Airflow 2's webserver asks
        the link, which reads the ``ui_url`` XCom from the metadata DB."""
        if airflow_version() >= (3, 0):
            return self.xcoms(dagrun, task_id).get("_link_AnylaunchAppLink")
        from airflow_anylaunch.links import AnylaunchAppLink

        ti = self.tis(dagrun)[task_id]
        return AnylaunchAppLink().get_link(dag.get_task(task_id), ti_key=ti.key)

    def xcoms(self, dagrun: Any, task_id: str) -> dict[str, Any]:
        """key -> value of the XComs a task pushed."""
        from airflow.utils.session import create_session
        from sqlalchemy import select

        XComModel = _xcom_model()
        with create_session() as session:
            rows = session.scalars(
                select(XComModel).where(
                    XComModel.dag_id == dagrun.dag_id,
                    XComModel.run_id == dagrun.run_id,
                    XComModel.task_id == task_id,
                )
            ).all()
            return {row.key: xcom_value(row) for row in rows}


@pytest.fixture
def airflow(airflow_db: None, state_dir: Path) -> AirflowHelper:
    """dag.test() helpers, with the DB ready and a fresh local_cwd state directory."""
    return AirflowHelper()


def local_apps() -> list[Any]:
    """The local_cwd apps in the current state directory (oldest first)."""
    from anylaunch.runner import get_runner

    with get_runner() as runner:
        return runner.list("local_cwd")


@pytest.fixture
def apps() -> Callable[[], list[Any]]:
    return local_apps


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """Polls ``check`` until it returns something truthy (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def waiter() -> Callable[..., Any]:
    return wait_for


@pytest.fixture
def kill_task_when_running() -> Iterator[Callable[[], dict[str, Any]]]:
    """Sends SIGTERM to this process (as Airflow's supervisor does to a task it kills) once a
    local_cwd app is RUNNING; the task runner's handler calls the operator's on_kill.

    Returns a dict that gets ``states_after_kill``: the apps' states 1 s after the signal.
    """
    threads: list[threading.Thread] = []
    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # never let it end pytest

    def start() -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def run() -> None:
            wait_for(
                "a RUNNING app",
                lambda: any(a.state.name == "RUNNING" for a in local_apps()),
                timeout=60,
            )
            time.sleep(0.5)  # let the task reach its wait loop
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
            seen["states_after_kill"] = [a.state.name for a in local_apps()]

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        return seen

    yield start
    for thread in threads:
        thread.join(timeout=70)
    signal.signal(signal.SIGTERM, previous)
