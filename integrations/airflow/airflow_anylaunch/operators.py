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

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from airflow_anylaunch._arrays import push_array, with_array_summary
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
from airflow_anylaunch._operator_args import as_list, check_operator_args
from airflow_anylaunch._templating import render_appdef
from airflow_anylaunch.exceptions import (
    AnylaunchAppError,
    AnylaunchAppFailedNoRetry,
    AnylaunchAppLost,
    AnylaunchAppTimeout,
    AnylaunchInputError,
)
from airflow_anylaunch.links import AnylaunchAppLink

if TYPE_CHECKING:
    import jinja2
    from airflow.sdk import XComArg
    from airflow.sdk.definitions.context import Context

    from anylaunch.runner import Runner
    from anylaunch.runner.failures import FailureCategory
    from anylaunch.runner.session import AppSession
    from anylaunch.runner.watch import PollError
    from anylaunch.specs.api import AppDef, AppDryRunInfo, AppStatus
    from anylaunch.specs.arrays import ArraySpec
    from anylaunch.specs.secrets import Redactor

__all__ = ["AnylaunchOperator"]

#: States from which a retry reattaches instead of launching again (UNKNOWN: the scheduler
#: cannot tell, so launching a second copy could duplicate the work).
_ACTIVE_STATES = frozenset({"UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING", "UNKNOWN"})


def _try_number(context: Context) -> int | None:
    """The running try's number (None where the task instance has none, e.g. a bare test)."""
    number = getattr(context.get("ti"), "try_number", None)
    return number if isinstance(number, int) and not isinstance(number, bool) else None


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
        "workspace",
        "session",
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "cfg": "json",
        "component_args": "json",
        "env": "json",
    }
    operator_extra_links = (AnylaunchAppLink(),)
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
        runner; returns the scheduler and cfg to use (the task's over the connection's)."""
        from airflow_anylaunch.hooks import AnylaunchHook
        from anylaunch.runner import get_runner
        from anylaunch.specs.errors import (
            InvalidRunConfigException,
            InvalidSpecError,
            UnknownSchedulerException,
        )

        try:
            check_operator_args(self, parse_time=False)
            settings = AnylaunchHook(self.anylaunch_conn_id).get_settings()
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
            opts = runner.scheduler_run_opts(scheduler)
            cfg = settings.cfg_for(runner, scheduler)
            task_cfg: Mapping[str, Any] = self.cfg or {}  # type: ignore[assignment]
            for key, value in task_cfg.items():
                opt = opts.get(key)
                # a rendered template is a str: cast it to the option's type
                if isinstance(value, str) and opt is not None and opt.opt_type is not str:
                    try:
                        value = opt.cast_to_type(value)
                    except (TypeError, ValueError) as e:
                        raise InvalidRunConfigException(
                            f"cfg[{key!r}]", value, str(e), f"pass a {opt.opt_type} value"
                        ) from None
                cfg[key] = value
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
            return op._dryrun(scheduler, cfg, None)[0]
        finally:
            op._close_runner()

    def dry_run(self, logical_date: datetime | None = None) -> None:
        """Prints the native request this task would submit (see :meth:`dryrun_request`),
        secrets masked; with ``logical_date``, templates rendered for that date."""
        op = self._rendered_copy(logical_date) if logical_date is not None else self
        scheduler, cfg = op._prepare(None)
        try:
            info, app = op._dryrun(scheduler, cfg, None)
        finally:
            op._close_runner()
        print(op._redactor_for(app)(str(info)))

    def _rendered_copy(self, logical_date: datetime) -> AnylaunchOperator:
        from airflow_anylaunch._templating import rendered_copy

        return rendered_copy(self, logical_date)

    def _dryrun(
        self,
        scheduler: str,
        cfg: dict[str, Any],
        parent: str | None,
        label: Mapping[str, str] | None = None,
    ) -> tuple[AppDryRunInfo[Any], AppDef]:
        """The request and the app it was built from (``label``: env added to every role)."""
        from anylaunch.components import ComponentNotFoundException
        from anylaunch.specs.errors import InvalidSpecError, UnknownSchedulerException

        assert self._runner is not None
        try:
            app = self._appdef()
            for role in app.roles:
                role.env.update(label or {})
            return self._runner.dryrun(app, scheduler, cfg, self.workspace, parent), app
        except (InvalidSpecError, UnknownSchedulerException, ComponentNotFoundException) as e:
            raise _input_error(e) from e

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
        """Dry-runs (logging the native request) and schedules the app; returns its handle."""
        from airflow_anylaunch._cleared import record_launch
        from anylaunch.runner.reap import owner_id

        assert self._runner is not None
        scheduler, cfg = self._scheduler_cfg
        ti = context["ti"]
        parent = owner_id("airflow", f"{ti.dag_id}/{ti.run_id}/{ti.task_id}")
        label = None
        if getattr(self, "reattach_by_label", False) and self.durable:
            from airflow_anylaunch._reattach import ENV_TASK_INSTANCE, task_instance_label

            label = {ENV_TASK_INSTANCE: task_instance_label(ti)}
        info, app = self._dryrun(scheduler, cfg, parent, label)
        self._redact = self._redactor_for(app)
        self.log.info("anylaunch request for scheduler %s:\n%s", scheduler, self._mask(str(info)))
        handle = self._runner.schedule(info)
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

        assert self._runner is not None
        handle = str(external_id)
        cleared = ended_by_user(context, handle)
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
            push_array(context, self._result)
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
        push_array(context, result)
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
        """Hands the wait to the trigger, with the deadlines made absolute (they survive
        triggerer restarts). Without a ``session`` (a just-launched app, deferred without
        asking its scheduler first, as KubernetesPodOperator does) the clock starts now and
        ``ui_url`` is pushed empty, filled in at the end."""
        from airflow_anylaunch.triggers import AnylaunchAppTrigger

        if session is None:
            self._handle = handle
            ti = context["ti"]
            ti.xcom_push(key=XCOM_APP_HANDLE, value=handle)
            ti.xcom_push(key=XCOM_UI_URL, value=ui_url_xcom(None))  # the link reads it
            self.ui_url_pushed = True
        began = time.time() if session is None else session.policy.began
        started = session is not None and session.policy.started
        if session is not None:
            startup_deadline = session.policy.startup_deadline
            run_deadline = session.policy.run_deadline
        else:
            timeout = self.startup_timeout
            startup_deadline = None if timeout is None else began + timeout
            run_deadline = None
        if self.execution_timeout is not None:
            # the same deadline Airflow gives the trigger; ours fires first and cancels the app
            start = getattr(context["ti"], "start_date", None)
            begin = start.timestamp() if start is not None else began
            ends = begin + self.execution_timeout.total_seconds()
            run_deadline = ends if run_deadline is None else min(run_deadline, ends)
        trigger = AnylaunchAppTrigger(
            app_handle=handle,
            poll_interval=self.poll_interval,
            stream_logs=self.stream_logs,
            log_roles=self.log_roles,
            log_replicas=self.log_replicas,
            # once started, the startup deadline is moot and the run deadline is fixed
            startup_deadline=None if started else startup_deadline,
            run_deadline=run_deadline,
            cancel_on_kill=self.on_kill_action == "cancel",
            run_timeout=None if started else self.run_timeout,
            secret_env_names=self.secret_env_names,
            # the triggerer pushes the return value itself when it ends the task; without
            # do_xcom_push there must be none, so the task resumes here as before
            end_from_trigger=bool(self.do_xcom_push),
            try_number=_try_number(context),
        )
        self.log.info("deferring: the triggerer waits for anylaunch app %s", handle)
        self._close_runner()
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        """Resumes after the trigger fired: returns the final status or raises its error.

        An event of an earlier try (Airflow 3.0-3.1 resume a retry with it instead of
        running ``execute``: apache/airflow#56704) is not this try's: the try starts afresh.
        """
        event = event or {}
        deferred_by, current = event.get("try_number"), _try_number(context)
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
            push_array(context, app_status)
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
