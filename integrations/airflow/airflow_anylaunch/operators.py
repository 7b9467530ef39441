"""``AnylaunchOperator``: launch an anylaunch app from Airflow, wait for it, cancel it on kill.

Lifecycle of one task: dryrun (the native request goes into the task log) → schedule → push
``app_handle`` and ``ui_url`` to XCom → wait (poll here, or defer to
:class:`~airflow_anylaunch.triggers.AnylaunchAppTrigger`) while the app's log lines stream
into the task log → return the final status as a dict, or fail with the app's message and
last log lines.

Retries reattach: the handle is kept in ``task_state_store`` (Airflow >= 3.3), so a retry after
a worker crash waits for the app still running instead of launching a duplicate; it launches
a new app only if the previous one failed. Before 3.3 the app carries the task instance's
identity in its env instead, and a retry finds it by that label (see ``_reattach``).

Importing this module is cheap: anylaunch's runner and the trigger are imported when a task
runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from airflow_anylaunch._arrays import with_array_summary
from airflow_anylaunch._common import (
    DEFAULT_CONN_ID,
    XCOM_APP_HANDLE,
    XCOM_UI_URL,
    interval,
    register_secrets,
    seconds,
    status_dict,
    ui_url_xcom,
)
from airflow_anylaunch._compat import BaseOperator, ResumableJobMixin, conf  # Airflow 3.3's or ours
from airflow_anylaunch._deferral import defer, try_number
from airflow_anylaunch._operator_args import as_list, check_operator_args
from airflow_anylaunch._outcome import push_outcome
from airflow_anylaunch._placed_task import (
    attach_placed,
    find_placed_labelled,
    placement_of,
    resume_move,
    run_placed,
)
from airflow_anylaunch._placement import EVENT_MOVE, push_placement
from airflow_anylaunch._templating import render_appdef
from airflow_anylaunch.exceptions import (
    AnylaunchAppError,
    AnylaunchAppFailedNoRetry,
    AnylaunchAppLost,
    AnylaunchAppTimeout,
    AnylaunchInputError,
)
from airflow_anylaunch.links import AnylaunchAppLink, AnylaunchArchiveLink

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import XComArg
    from airflow.sdk.definitions.context import Context

    from anylaunch.runner import Runner
    from anylaunch.runner.failures import FailureCategory
    from anylaunch.runner.placement import Placement, Target
    from anylaunch.runner.session import AppSession
    from anylaunch.runner.watch import PollError
    from anylaunch.specs.api import AppDef, AppDryRunInfo, AppStatus
    from anylaunch.specs.arrays import ArraySpec
    from anylaunch.specs.secrets import Redactor

__all__ = ["AnylaunchOperator"]

#: States from which a retry reattaches instead of launching again (UNKNOWN: the scheduler
#: cannot tell, so launching a second copy could duplicate the work).
_ACTIVE_STATES = frozenset({"UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING", "UNKNOWN"})


def _input_error(e: Exception) -> AnylaunchInputError:
    return AnylaunchInputError(f"{type(e).__name__}: {e}")


class AnylaunchOperator(ResumableJobMixin, BaseOperator):
    """Runs an anylaunch app (an AppDef or a named component) and waits for it.

    Give either ``app`` or ``component``. The scheduler, cfg and session default to those of
    the ``anylaunch`` connection (:class:`~airflow_anylaunch.hooks.AnylaunchHook`).

    Args:
        app: an ``AppDef``, or a callable returning one (called when the task runs)
        component: a component name (``utils.echo``, ``path/file.py:fn``) - templated
        component_args: its arguments, ``{param: value}`` or CLI-style ``["--msg", "hi"]`` -
            templated
        array: run the app (``app``'s or ``component``'s) as this job array, one task for
            every index: ``ArraySpec(size, parallelism, min_success_ratio)``, or a sweep's
            ``ArraySpec(len(grid), params=grid)`` (index ``i`` sees ``${param.<name>}`` and
            ``ANYLAUNCH_PARAM_<NAME>``). An ``app`` built with ``specs.sweep`` or ``array=``
            runs as its own array without it. The task fails when fewer than
            ``min_success_ratio`` of the indices succeed (naming the failed ones); the
            per-index outcomes go to XCom (``array``)
        scheduler: where to run (default: the connection's) - templated
        cfg: run options of the scheduler, over the connection's - templated
        targets: instead of ``scheduler`` and ``cfg``: the ordered places the app may run
            (placement): ``anylaunch.runner.placement.Target`` objects, scheduler names, or
            dicts ``{"scheduler": ..., "cfg": {...}, "startup_timeout": ...}``. The app goes
            to the first target whose capacity is not "no", moves on when it cannot start
            there, and keeps one stable ``placement://`` handle; the task (in sync and
            deferred mode) makes the moves. Each target's cfg goes over the connection's.
            The history goes to XCom (``placement``) - templated
        max_infra_retries: with ``targets``: relaunches of the app after the platform lost
            it (node lost, preempted), apart from the task's own retries
        checkpoint_root: with ``targets``: the fsspec URL of the placement record and of
            the app's ``ANYLAUNCH_CHECKPOINT_URL`` (default: ``$ANYLAUNCH_CHECKPOINT_ROOT``,
            ``.anylaunchconfig``, else ``~/.anylaunch/placements``: one host only) - templated
        workspace: overrides the first role's workspace (``""`` disables it) - templated
        session: session name in the app handle (default: the connection's, else
            ``anylaunch``) - templated
        app_name: overrides the app's name - templated
        image: overrides every role's image - templated
        env: added to every role's environment - templated
        anylaunch_conn_id: the ``anylaunch`` connection (None: use none)
        wait_for_completion: False returns right after scheduling (with the handle)
        deferrable: wait in the triggerer (default: ``[operators] default_deferrable``)
        poll_interval: the most seconds between status polls (polls back off, jittered,
            from 0.1 s up to this)
        startup_timeout: seconds (or timedelta) the app may take to start (RUNNING); past it
            the app is cancelled and the task fails. ``execution_timeout`` bounds the whole
            wait the same way (the app is cancelled too)
        run_timeout: seconds (or timedelta) the app may run once started; past it the app is
            cancelled and the task fails with ``AnylaunchAppTimeout``
        secret_env_names: env names whose values are secret besides those matching the
            built-in patterns (TOKEN, SECRET, PASS, PWD, KEY, CREDENTIAL, AUTH): masked in
            the task log, in failures and in XCom
        on_kill_action: ``cancel`` (default) cancels the app when the task is killed (sync and
            deferred); ``keep`` leaves it running
        stream_logs: copy the app's log lines into the task log while waiting
        log_roles: only these roles' lines (default: all)
        log_replicas: only these replica ids' lines (default: all), e.g. ``[0]``
        durable: let a retry reattach to the app of an earlier try that still runs (the
            handle is kept in ``task_state_store`` on Airflow >= 3.3; before, the app is
            labelled with the task instance and found again by that label)
        retry_only_infrastructure_failures: use the task's retries only for failures retrying
            can fix (a lost replica, a node lost or preempted, an image pull or scheduling
            failure, a startup timeout); an app's own failure (non-zero exit, out of memory, a
            run timeout) fails the task at once with ``AnylaunchAppFailedNoRetry``. The
            category is in the failure's ``failure_category`` and in the status dict

    Returns (and pushes as the XCom ``return_value``) the final status: ``app_handle``,
    ``state``, ``msg``, ``num_restarts``, ``ui_url``, ``roles``, ...
    """

    template_fields: Sequence[str] = (
        "app",
        "component",
        "component_args",
        "app_name",
        "image",
        "env",
        "scheduler",
        "cfg",
        "targets",
        "checkpoint_root",
        "workspace",
        "session",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "cfg": "json",
        "targets": "json",
        "component_args": "json",
        "env": "json",
    }
    operator_extra_links = (AnylaunchAppLink(), AnylaunchArchiveLink())
    ui_color = "#dbe9f6"
    #: the task_state_store key holding the app handle (renaming it breaks in-flight retries)
    external_id_key = "anylaunch_app_handle"

    def __init__(
        self,
        *,
        app: AppDef | Callable[[], AppDef] | None = None,
        component: str | None = None,
        component_args: Mapping[str, Any] | Sequence[str] | XComArg | None = None,
        array: ArraySpec | None = None,
        scheduler: str | None = None,
        cfg: Mapping[str, Any] | XComArg | None = None,
        targets: Sequence[Target | str | Mapping[str, Any]] | str | XComArg | None = None,
        max_infra_retries: int = 0,
        checkpoint_root: str | None = None,
        workspace: str | None = None,
        session: str | None = None,
        app_name: str | None = None,
        image: str | None = None,
        env: Mapping[str, str] | XComArg | None = None,
        anylaunch_conn_id: str | None = DEFAULT_CONN_ID,
        wait_for_completion: bool = True,
        deferrable: bool | None = None,
        poll_interval: float | timedelta = 10.0,
        startup_timeout: float | timedelta | None = None,
        run_timeout: float | timedelta | None = None,
        secret_env_names: Sequence[str] | None = None,
        on_kill_action: str = "cancel",
        stream_logs: bool = True,
        log_roles: Sequence[str] | None = None,
        log_replicas: Sequence[int] | None = None,
        retry_only_infrastructure_failures: bool = False,
        durable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(durable=durable, **kwargs)
        self.retry_only_infrastructure_failures = retry_only_infrastructure_failures
        self.app = app
        self.component = component
        self.component_args = component_args
        self.array = array
        self.scheduler = scheduler
        self.cfg = cfg
        self.targets = targets
        self.max_infra_retries = max_infra_retries
        self.checkpoint_root = checkpoint_root
        self.workspace = workspace
        self.session = session
        self.app_name = app_name
        self.image = image
        self.env = env
        self.anylaunch_conn_id = anylaunch_conn_id
        self.wait_for_completion = wait_for_completion
        if deferrable is None:
            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        self.deferrable = deferrable
        self.poll_interval = interval("poll_interval", poll_interval)
        self.startup_timeout = seconds("startup_timeout", startup_timeout)
        self.run_timeout = seconds("run_timeout", run_timeout)
        self.secret_env_names = as_list(secret_env_names)
        self.on_kill_action = on_kill_action
        self.stream_logs = stream_logs
        self.log_roles = as_list(log_roles)
        self.log_replicas = as_list(log_replicas)
        check_operator_args(self, parse_time=True)
        # set while a task runs
        self._runner: Runner | None = None
        self._handle: str | None = None
        self._result: dict[str, Any] | None = None
        self._session: AppSession | None = None  # the wait of this try
        self._launched = False  # this try scheduled the app (vs. reattached to one)
        self._scheduler_cfg: tuple[str, dict[str, Any]] = ("", {})
        self._placement: Placement | None = None  # the rendered targets, once prepared
        self._redact: Redactor | None = None
        #: whether this try's ``ui_url`` XCom exists (else the link must not read it)
        self.ui_url_pushed = False

    # --- templating ------------------------------------------------------------------------

    def render_template(
        self,
        content: Any,
        context: Context,
        jinja_env: jinja2.Environment | None = None,
        seen_oids: set[int] | None = None,
    ) -> Any:
        """Renders like any operator, and also inside an AppDef (see ``_templating``)."""
        from anylaunch.specs.api import AppDef

        if isinstance(content, AppDef):
            render = super().render_template
            return render_appdef(content, lambda value: render(value, context, jinja_env))
        return super().render_template(content, context, jinja_env, seen_oids)

    def render_template_fields(
        self, context: Context, jinja_env: jinja2.Environment | None = None
    ) -> None:
        """Renders the template fields; an ``app`` callable is built first, so the AppDef it
        returns is rendered too."""
        from anylaunch.specs.api import AppDef

        if self.app is not None and not isinstance(self.app, AppDef) and callable(self.app):
            built = self.app()
            if isinstance(built, AppDef):  # anything else is reported by _appdef()
                self.app = built
        super().render_template_fields(context, jinja_env)
        # before Airflow stores the rendered fields: tell its masker the secret values, so
        # the Rendered Template view masks names declared in secret_env_names too
        from airflow_anylaunch._compat import mask_secret
        from anylaunch.specs.secrets import secret_values

        if isinstance(self.app, AppDef):
            self._redactor_for(self.app)
        if isinstance(self.env, Mapping) and all(isinstance(v, str) for v in self.env.values()):
            for value in secret_values(self.env, self.secret_env_names or ()):
                mask_secret(value)

    # --- validation ------------------------------------------------------------------------

    # --- building the request --------------------------------------------------------------

    def _appdef(self) -> AppDef:
        """The app to launch, with the name/image/env overrides applied (a copy)."""
        import copy

        from anylaunch.specs.api import AppDef
        from anylaunch.specs.checks import check_type

        if self.app is not None:
            app = (
                self.app() if callable(self.app) and not isinstance(self.app, AppDef) else self.app
            )
            check_type(
                "app", app, AppDef, "the callable must return an AppDef", "return specs.AppDef(...)"
            )
            app = copy.deepcopy(app)
        else:
            app = self._component_appdef()
        if self.array is not None:
            app.array = self.array
            app.validate_array()
        if self.app_name:
            app.name = self.app_name
        for role in app.roles:
            if self.image:
                role.image = self.image
            if self.env:
                role.env.update(self.env)  # type: ignore[arg-type]
        return app

    def _component_appdef(self) -> AppDef:
        assert self._runner is not None
        args: Sequence[str] | Mapping[str, object] = self.component_args or []  # type: ignore[assignment]
        return self._runner.materialize_component(str(self.component), args)

    def _prepare(self, context: Context | None) -> tuple[str, dict[str, Any]]:
        """Validates the rendered arguments, reads the connection and creates this task's
        runner; returns the scheduler and cfg to use (the task's over the connection's). With
        ``targets``, also builds the placement (:attr:`_placement`); the first target's
        scheduler and cfg are returned."""
        from airflow_anylaunch._operator_args import typed_cfg
        from airflow_anylaunch.hooks import AnylaunchHook
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

        try:
            check_operator_args(self, parse_time=False)
            settings = AnylaunchHook(self.anylaunch_conn_id).get_settings()
            if self.targets is not None:
                self._runner = get_runner(self.session or settings.session)
                self._placement = placement_of(self, self._runner, settings)
                first = self._placement.resolved_targets[0]
                return first.scheduler, dict(first.cfg or {})
            scheduler = self.scheduler or settings.scheduler
            if not scheduler:
                raise InvalidSpecError(
                    "scheduler",
                    None,
                    f"no scheduler given and the connection {self.anylaunch_conn_id!r} names none",
                    "pass scheduler='local_cwd' (or another), or set \"scheduler\" in the "
                    "extra of an anylaunch connection",
                )
            self._runner = runner = get_runner(self.session or settings.session)
            task_cfg: Mapping[str, Any] = self.cfg or {}  # type: ignore[assignment]
            cfg = typed_cfg(runner, scheduler, settings.cfg_for(runner, scheduler), task_cfg, "cfg")
        except (InvalidSpecError, UnknownSchedulerException) as e:
            self._close_runner()
            raise _input_error(e) from e
        return scheduler, cfg

    def dryrun_request(self, logical_date: datetime | None = None) -> AppDryRunInfo[Any]:
        """The request this task would submit (``print()`` it), built offline: no
        submission, no network, no credentials.

        Args:
            logical_date: render the templates first, as a manual run at this date would
                (dates, ids, params and macros; ``var``, ``conn`` and ``ti`` need a real
                run). Without it, templates are not rendered.
        """
        op = self._rendered_copy(logical_date) if logical_date is not None else self
        scheduler, cfg = op._prepare(None)
        try:
            return op._requests(scheduler, cfg, None)[0][0][1]
        finally:
            op._close_runner()

    def dry_run(self, logical_date: datetime | None = None) -> None:
        """Prints the native request this task would submit (see :meth:`dryrun_request`;
        with ``targets``, each target's under its name), secrets masked; with
        ``logical_date``, templates rendered for that date."""
        op = self._rendered_copy(logical_date) if logical_date is not None else self
        scheduler, cfg = op._prepare(None)
        try:
            requests, app = op._requests(scheduler, cfg, None)
        finally:
            op._close_runner()
        redact = op._redactor_for(app)
        for where, info in requests:
            print(redact(str(info) if op._placement is None else f"# {where}\n{info}"))

    def _rendered_copy(self, logical_date: datetime) -> AnylaunchOperator:
        from airflow_anylaunch._templating import rendered_copy

        return rendered_copy(self, logical_date)

    def _requests(
        self,
        scheduler: str,
        cfg: dict[str, Any],
        parent: str | None,
        label: Mapping[str, str] | None = None,
    ) -> tuple[list[tuple[str, AppDryRunInfo[Any]]], AppDef]:
        """Each target's request (``target i of n (scheduler s)``; without ``targets``, the
        one of ``scheduler``) and the app they were built from (``label``: env added to
        every role)."""
        import copy

        from anylaunch.components import ComponentNotFoundException
        from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

        assert self._runner is not None
        placed = self._placement.resolved_targets if self._placement is not None else ()
        where = [
            (f"target {i} of {len(placed)} (scheduler {t.scheduler})", t.scheduler, t.cfg)
            for i, t in enumerate(placed, 1)
        ] or [(f"scheduler {scheduler}", scheduler, cfg)]
        try:
            app = self._labelled_app(label)
            requests = [
                (name, self._runner.dryrun(copy.deepcopy(app), s, c, self.workspace, parent))
                for name, s, c in where
            ]
        except (InvalidSpecError, UnknownSchedulerException, ComponentNotFoundException) as e:
            raise _input_error(e) from e
        return requests, app

    def _labelled_app(self, label: Mapping[str, str] | None) -> AppDef:
        """:meth:`_appdef` with ``label`` added to every role's env."""
        from anylaunch.components import ComponentNotFoundException
        from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

        try:
            app = self._appdef()
        except (InvalidSpecError, UnknownSchedulerException, ComponentNotFoundException) as e:
            raise _input_error(e) from e
        for role in app.roles:
            role.env.update(label or {})
        return app

    def _parent_and_label(self, context: Context) -> tuple[str, dict[str, str] | None]:
        """The owner id of this task's apps, and the env labelling them with the task
        instance (None: no label; see ``_reattach``)."""
        from anylaunch.runner.reap import owner_id

        ti = context["ti"]
        parent = owner_id("airflow", f"{ti.dag_id}/{ti.run_id}/{ti.task_id}")
        if not (getattr(self, "reattach_by_label", False) and self.durable):
            return parent, None
        from airflow_anylaunch._reattach import ENV_TASK_INSTANCE, task_instance_label

        return parent, {ENV_TASK_INSTANCE: task_instance_label(ti)}

    def _close_runner(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()

    # --- secrets ---------------------------------------------------------------------------

    def _redactor_for(self, app: AppDef | None) -> Redactor:
        """A redactor for the secret env values of ``app`` (the built-in secret names and
        ``secret_env_names``); the values are told to Airflow's own masker as well."""
        from anylaunch.specs.secrets import app_redactor

        redact = app_redactor(app, self.secret_env_names or ())
        register_secrets(redact.values)
        return redact

    def _mask(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    # --- execution -------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        self._scheduler_cfg = self._prepare(context)
        self._handle = None
        self._result = None
        self._session = None
        self._launched = False
        self._redact = None
        try:
            result = self.execute_resumable(context)
        finally:
            self._close_runner()
        return result if result is not None else self._result

    def submit_job(self, context: Context) -> str:
        """Dry-runs (logging the native request: each target's, with ``targets``) and
        schedules the app (places it, with ``targets``); returns its handle."""
        from airflow_anylaunch._cleared import record_launch

        assert self._runner is not None
        scheduler, cfg = self._scheduler_cfg
        parent, label = self._parent_and_label(context)
        requests, app = self._requests(scheduler, cfg, parent, label)
        self._redact = self._redactor_for(app)
        for where, info in requests:
            self.log.info("anylaunch request for %s:\n%s", where, self._mask(str(info)))
        if self._placement is None:
            handle = self._runner.schedule(requests[0][1])
        else:
            handle = run_placed(self, app, parent)
        self._launched = True
        self.log.info("launched anylaunch app %s", handle)
        record_launch(context, handle, self.log)  # a try after a clear then knows it is older
        return handle

    def find_labelled_job(self, context: Context) -> str | None:
        """The newest live app of this task instance launched by an earlier try (found by
        its label; Airflow < 3.3), or None. A failing search is logged: the task then
        launches afresh."""
        from airflow_anylaunch._reattach import ENV_TASK_INSTANCE, task_instance_label
        from anylaunch.runner.rediscover import find_live_apps

        assert self._runner is not None
        scheduler, cfg = self._scheduler_cfg
        label = task_instance_label(context["ti"])
        try:
            if self._placement is not None:
                return find_placed_labelled(self, label)
            found = find_live_apps(self._runner, scheduler, ENV_TASK_INSTANCE, label, cfg)
        except Exception as e:
            self.log.warning(
                "cannot look for the app of an earlier try on %s: %s",
                scheduler,
                self._mask(f"{type(e).__name__}: {e}"),
            )
            return None
        if len(found) > 1:
            self.log.warning(
                "%d live apps of %s: reattaching to the newest, %s", len(found), label, found[-1]
            )
        return found[-1] if found else None

    def get_job_status(self, external_id: Any, context: Context) -> str:
        """The state a retry decides on (the core reattach rule: an app being cancelled is
        waited for and never adopted, nor is one launched before this task instance was
        cleared, which is cancelled: the retry then launches a fresh app)."""
        from airflow_anylaunch._cleared import ended_by_user
        from anylaunch.runner.driver import AppBeingCancelledError, status_for_reattach
        from anylaunch.specs.handles import is_placed

        assert self._runner is not None
        handle = str(external_id)
        cleared = ended_by_user(context, handle)
        if self._placement is not None and is_placed(handle) and not cleared:
            attach_placed(self, context, handle)  # before any status call: this task moves it
        if cleared:  # neither adopted nor reused, even if it succeeded: a rerun runs again
            self.log.warning(
                "anylaunch app %s was launched before this task instance was cleared: not "
                "adopting it (cancelled if it still runs)",
                handle,
            )
        try:
            status = status_for_reattach(self._runner, handle, ended_by_user=cleared)
        except AppBeingCancelledError as e:
            raise AnylaunchAppError(str(e), handle) from None
        if cleared:
            return "CLEARED"  # neither active nor succeeded: a fresh app is launched
        return "MISSING" if status is None else status.state.name

    def is_job_active(self, status: str) -> bool:
        return status in _ACTIVE_STATES

    def is_job_succeeded(self, status: str) -> bool:
        return status == "SUCCEEDED"

    def _publish(self, context: Context, handle: str) -> AppStatus | PollError | None:
        """Pushes the handle and UI link to XCom (before any waiting) and returns the first
        observation of the app by this try's session (:attr:`_session`): its status (None:
        unknown to its scheduler), or the error of a failed status call."""
        from anylaunch.runner.session import AppSession, logger_sink
        from anylaunch.specs.api import AppStatus

        assert self._runner is not None
        self._handle = handle
        ti = context["ti"]
        ti.xcom_push(key=XCOM_APP_HANDLE, value=handle)
        session = self._session = AppSession(
            self._runner,
            handle,
            sink=logger_sink(self.log),
            poll_interval=self.poll_interval,
            startup_timeout=self.startup_timeout,
            run_timeout=self.run_timeout,
            secrets=self._redact,
            secret_env_names=self.secret_env_names or (),
            # a reattached task: the app's env (its secrets) comes from its scheduler
            learn_secrets=self._redact is None,
            on_secrets=register_secrets,
            logs="pump" if self.stream_logs else "off",
            log_roles=self.log_roles,
            log_replicas=self.log_replicas,
        )
        session.learn_secrets()
        observation = session.poll()
        session.emit()
        self._redact = session.secrets
        ui_url = observation.ui_url if isinstance(observation, AppStatus) else None
        ti.xcom_push(key=XCOM_UI_URL, value=ui_url_xcom(ui_url))
        self.ui_url_pushed = True
        if isinstance(observation, AppStatus) and observation.placement is not None:
            push_placement(context, status_dict(handle, observation, session.redactor))
        if ui_url:
            self.log.info("anylaunch app %s UI: %s", handle, ui_url)
        return observation

    def _known(self, handle: str, observation: AppStatus | PollError | None) -> dict[str, Any]:
        """The result of a task that does not wait: the app's status (failing if it is gone)."""
        from anylaunch.runner.outcome import failure_summary
        from anylaunch.specs.api import AppStatus

        if observation is None:
            raise AnylaunchAppLost(failure_summary(handle, None), handle)
        known = observation if isinstance(observation, AppStatus) else None
        return status_dict(handle, known, self._mask)

    def poll_until_complete(self, external_id: Any, context: Context) -> None:
        """Waits for the app here, or defers to the trigger; raises if it did not succeed."""
        handle = str(external_id)
        if self.deferrable and self.wait_for_completion and self._launched:
            self._defer(context, handle)  # at once: the trigger's first poll is the first look
        observation = self._publish(context, handle)
        if not self.wait_for_completion:
            self._result = self._known(handle, observation)
            return
        session = self._session
        assert session is not None
        if self.deferrable:  # even if already over: the trigger then says so at once
            session.observe(observation)  # no feed, no log readers: the trigger has its own
            session.close()
            self._defer(context, handle, session)
        self._result = self._wait(session, observation, context)

    def get_job_result(self, external_id: Any, context: Context) -> Any:
        if self._result is None:  # the app succeeded in an earlier try
            handle = str(external_id)
            self._result = self._known(handle, self._publish(context, handle))
            push_outcome(context, self._result, self._mask)
        return self._result

    def _wait(
        self, session: AppSession, first: AppStatus | PollError | None, context: Context
    ) -> dict[str, Any]:
        """The sync wait: the session watches the app from this thread (an
        ``execution_timeout`` cancels it: a timed-out wait never leaves the app running);
        returns the status dict of an app that succeeded, raises for anything else (an
        array's per-index outcomes go to XCom either way)."""
        from airflow_anylaunch._compat import AirflowTaskTimeout

        handle = session.handle
        outcome = session.run(first, interrupt_cancels=(AirflowTaskTimeout,))
        status = outcome.status
        result = None if status is None else status_dict(handle, status, session.redactor)
        push_outcome(context, result, session.redactor)
        if outcome.succeeded:
            assert result is not None
            return result
        kind = {
            "startup_timeout": AnylaunchAppTimeout,
            "run_timeout": AnylaunchAppTimeout,
            "lost": AnylaunchAppLost,
        }.get(outcome.kind, AnylaunchAppError)
        message = with_array_summary(outcome.message, status)
        raise self._failure(kind, message, handle, result, outcome.category)

    def _failure(
        self,
        kind: type[AnylaunchAppError],
        text: str,
        handle: str | None,
        status: dict[str, Any] | None,
        category: FailureCategory | str | None,
    ) -> AnylaunchAppError:
        """The exception a failed app raises: ``kind``, or ``AnylaunchAppFailedNoRetry`` when
        only infrastructure failures may use the task's retries and this one may not."""
        from anylaunch.runner.failures import FailureCategory, retryable

        value = category.value if isinstance(category, FailureCategory) else category
        known = value if value in FailureCategory._value2member_map_ else None
        only_infra = self.retry_only_infrastructure_failures
        if only_infra and known is not None and not retryable(FailureCategory(known)):
            text = f"{text}\nnot retried: a {known} failure (retry_only_infrastructure_failures)"
            return AnylaunchAppFailedNoRetry(text, handle, status, known)
        return kind(text, handle, status, value)

    # --- deferred mode ---------------------------------------------------------------------

    def _defer(self, context: Context, handle: str, session: AppSession | None = None) -> NoReturn:
        """Hands the wait to the trigger (see ``_deferral.defer``)."""
        defer(self, context, handle, session)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resumes after the trigger fired: returns the final status or raises its error.

        An event of an earlier try (Airflow 3.0-3.1 resume a retry with it instead of
        running ``execute``: apache/airflow#56704) is not this try's: the try starts afresh.
        """
        event = event or {}
        deferred_by, current = event.get("try_number"), try_number(context)
        if isinstance(deferred_by, int) and current is not None and deferred_by != current:
            self.log.warning(
                "resumed with the trigger event of try %d in try %d: starting afresh",
                deferred_by,
                current,
            )
            return self.execute(context)
        handle = event.get("app_handle")
        self.ui_url_pushed = handle is not None  # pushed by the try that deferred
        outcome = event.get("status")
        app_status = event.get("app_status")
        if handle is not None and isinstance(app_status, dict):
            # a try that deferred at once pushed it empty: the last status knows it
            context["ti"].xcom_push(key=XCOM_UI_URL, value=ui_url_xcom(app_status.get("ui_url")))
            push_outcome(context, app_status, self._mask)
        if outcome == EVENT_MOVE:  # the triggerer cannot move the app: this worker does
            resume_move(self, context, event)
        if outcome == "success":
            return app_status
        message = event.get("message") or f"anylaunch app {handle}: trigger ended with {event!r}"
        category = event.get("failure_category")
        if outcome == "timeout":
            raise self._failure(AnylaunchAppTimeout, message, handle, app_status, category)
        if outcome == "error":
            raise self._failure(AnylaunchAppLost, message, handle, app_status, category)
        raise self._failure(AnylaunchAppError, message, handle, app_status, category)

    def resume_execution(
        self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context
    ) -> Any:
        from airflow_anylaunch._compat import TaskDeferralTimeout, is_deferral_timeout

        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout as e:
            if not is_deferral_timeout(e):  # Airflow 2: the trigger itself failed
                raise
            # Airflow's own trigger timeout won the race: still never leave the app running
            handle = self._stored_handle(context)
            if handle:
                self._cancel_app(handle, "the trigger timed out")
            raise

    def _stored_handle(self, context: Context) -> str | None:
        store = context.get("task_state_store")
        handle = store.get(self.external_id_key) if store is not None else None
        if not handle:
            handle = context["ti"].xcom_pull(task_ids=self.task_id, key=XCOM_APP_HANDLE)
        return str(handle) if handle else None

    # --- kill ------------------------------------------------------------------------------

    def on_kill(self) -> None:
        """The task is being killed (sync mode): cancel the app, unless ``on_kill_action`` is
        ``keep`` (a timeout has already cancelled it)."""
        handle = self._handle
        if handle is None or (self._session is not None and self._session.cancelled):
            return
        if self.on_kill_action == "keep":
            self.log.warning(
                "task killed; leaving anylaunch app %s running (on_kill_action=keep)", handle
            )
            return
        self._cancel_app(handle, "task killed")

    def _cancel_app(self, handle: str, why: str) -> None:
        """Cancels the app by the core rule with a runner of its own (safe from a signal
        handler mid-poll), best effort: a failing cancel is logged, never raised over the
        reason the task ends."""
        from anylaunch.runner.session import cancel_app

        self.log.warning("%s: cancelling anylaunch app %s", why, handle)
        try:
            cancel_app(handle)
        except Exception as e:
            self.log.error(
                "could not cancel anylaunch app %s: %s",
                handle,
                self._mask(f"{type(e).__name__}: {e}"),
            )
