"""Prefect blocks: ``AnylaunchJob`` (what to launch, where, and how to watch it), its
``AnylaunchJobRun``, and ``AnylaunchSchedulerSettings`` (a scheduler and its run options,
secrets included, shared by many jobs).

Everything scheduler-specific happens in :class:`anylaunch.runner.Runner`; these are thin
adapters that add Prefect's run logger, artifacts and flow-run labels.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Literal

from prefect._internal.compatibility.async_dispatch import async_dispatch
from prefect.blocks.abstract import JobBlock, JobRun
from prefect.blocks.core import Block
from prefect.types import SecretDict
from prefect.utilities.asyncutils import run_sync_in_worker_thread
from pydantic import Field, SerializationInfo, field_serializer, field_validator, model_validator

from anylaunch.runner import Runner, get_runner
from anylaunch.runner.array_results import with_failed_indices
from anylaunch.runner.outcome import Outcome, masked_status
from anylaunch.runner.placement import Placement
from anylaunch.runner.placement_input import (
    CHECKPOINT_ROOT_HELP,
    MAX_INFRA_RETRIES_HELP,
    TARGETS_HELP,
    placement_from_data,
    target_as_data,
)
from anylaunch.runner.session import AppSession, cancel_app, logger_sink
from anylaunch.runner.session_options import SECONDS_OPTION_NAMES
from anylaunch.runner.wake import first_word
from anylaunch.runner.watch import Lost, RunTimedOut, StartupTimedOut
from anylaunch.specs.api import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    parse_app_handle,
)
from anylaunch.specs.checks import check_seconds, check_type
from anylaunch.specs.errors import InvalidSpecError, UnknownAppException, did_you_mean
from anylaunch.specs.handles import is_placed
from anylaunch.specs.secrets import Redactor, app_redactor
from anylaunch.specs.serialize import appdef_to_dict
from prefect_anylaunch import _prefect
from prefect_anylaunch._block_checks import check_job_names, check_settings_names
from prefect_anylaunch.appdef import appdef_from_data
from prefect_anylaunch.arrays import array_result, end_table, sweep_params
from prefect_anylaunch.errors import (
    AnylaunchAppFailedError,
    AnylaunchAppLostError,
    AnylaunchAppTimeoutError,
)
from prefect_anylaunch.placement import (
    AnylaunchTarget,
    check_placement_fields,
    placement_artifact,
    placement_result,
    targets_markdown,
)
from prefect_anylaunch.tracked import ended_extras, tracked_artifact

__all__ = ["AnylaunchJob", "AnylaunchJobRun", "AnylaunchSchedulerSettings"]

_DEFAULT_SESSION = "anylaunch"


def _no_unknown_fields(cls: type[Block], data: Any) -> Any:
    """Rejects a misspelt field (``Block`` allows extras, so ``sheduler=...`` would otherwise
    be ignored and the app would run somewhere else), with a did-you-mean."""
    from anylaunch.specs.checks import check_known_fields

    check_known_fields(cls.__name__, data, cls.model_fields)
    return data


class AnylaunchSchedulerSettings(Block):
    """A scheduler and its run options (cfg), shared by many Anylaunch jobs. Secret run
    options and secret environment variables are stored as secrets: masked in the UI, in
    logs and in dryrun artifacts.

    Example:
        ```python
        from prefect_anylaunch import AnylaunchSchedulerSettings

        AnylaunchSchedulerSettings(
            scheduler="kubernetes", cfg={"namespace": "ml"}, secret_env={"HF_TOKEN": "..."}
        ).save("k8s-ml")
        ```
    """

    _block_type_name = "Anylaunch Scheduler Settings"

    scheduler: str = Field(
        default="local_cwd",
        description="Scheduler name (`anylaunch runopts` lists them), e.g. local_cwd, kubernetes.",
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict,
        description="Run options of the scheduler (`anylaunch runopts SCHEDULER`).",
    )
    # SecretDict (not dict[str, SecretStr]): the API masks every value under it
    secret_cfg: SecretDict = Field(
        default_factory=lambda: SecretDict({}),
        description="Run options whose values are secrets (merged into cfg at launch).",
    )
    secret_env: SecretDict = Field(
        default_factory=lambda: SecretDict({}),
        description="Environment variables set in every role of every app, e.g. API tokens.",
    )

    def __init__(self, *args: Any, **data: Any) -> None:
        # checked before pydantic sees the data: its errors would quote the (secret) input
        _no_unknown_fields(type(self), data)
        super().__init__(*args, **data)

    @model_validator(mode="after")
    def _check(self) -> AnylaunchSchedulerSettings:
        check_settings_names(  # the scheduler, cfg/secret_cfg overlap, secret_env names
            self.scheduler, self.cfg, self.secret_cfg.get_secret_value(), self.env()
        )
        return self

    def run_cfg(self) -> dict[str, Any]:
        """cfg with the secret options revealed (what the scheduler is given)."""
        return {**self.cfg, **self.secret_cfg.get_secret_value()}

    def env(self) -> dict[str, str]:
        """The secret environment variables, revealed (what every role is given)."""
        return dict(self.secret_env.get_secret_value())

    def secret_values(self) -> list[str]:
        """Every secret value (they are masked wherever this package writes text)."""
        values = [*self.secret_cfg.get_secret_value().values(), *self.env().values()]
        return [str(v) for v in values if isinstance(v, (str, int, float))]

    def redactor(self) -> Redactor:
        """Masks every value of ``secret_cfg`` and ``secret_env`` (declared secret whatever
        their names)."""
        options = self.secret_cfg.get_secret_value().values()
        env = self.env()
        return Redactor(str(v) for v in options if isinstance(v, (str, int, float))) | (
            Redactor.for_env(env, declared=env)
        )


class AnylaunchJob(JobBlock[dict[str, Any]]):
    """An anylaunch app to launch (a component with its arguments, or an AppDef), where to
    launch it (scheduler, cfg, settings block; or ordered placement ``targets``) and how to
    watch it (poll interval, startup and run timeouts, which logs to stream into the Prefect
    run log).

    ``trigger()`` dry-runs then schedules the app and returns an ``AnylaunchJobRun``. With
    ``targets`` it places the app instead (:mod:`anylaunch.runner.placement`): on the first
    target whose capacity is not "no", moving on when it cannot start there and relaunching
    it (up to ``max_infra_retries`` times) when the platform loses it; its handle
    ``placement://...`` stays the same across attempts.

    Example:
        ```python
        from prefect_anylaunch import AnylaunchJob

        job = AnylaunchJob(component="utils.echo", component_args={"msg": "hi"})
        run = job.trigger()
        run.wait_for_completion()
        print(run.fetch_result()["state"])
        ```
    """

    _block_type_name = "Anylaunch Job"

    component: str | None = Field(
        default=None,
        description="Component to launch: a built-in (utils.echo), a plugin or path/file.py:fn.",
    )
    component_args: dict[str, Any] | list[str] = Field(
        default_factory=dict,
        description="The component's arguments: {param: value}, or as on the command line.",
    )
    app: dict[str, Any] | str | None = Field(
        default=None,
        description="An AppDef as a dict or YAML text (as `anylaunch describe` prints), "
        "instead of a component.",
    )
    scheduler: str | None = Field(
        default=None,
        description="Scheduler name; default: the settings block's, else local_cwd.",
    )
    settings: AnylaunchSchedulerSettings | None = Field(
        default=None, description="Scheduler settings shared by several jobs."
    )
    cfg: dict[str, Any] = Field(
        default_factory=dict, description="Run options; they override the settings block's."
    )
    workspace: str | None = Field(
        default=None,
        description="Overrides the first role's workspace (a path); empty string: none.",
    )
    session_name: str = Field(
        default=_DEFAULT_SESSION, description="Session name in the app handles."
    )
    poll_interval_s: float = Field(
        default=5.0, gt=0, description="Longest pause between status polls (seconds)."
    )
    startup_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Fail (and cancel) if the app is not running this many seconds after "
        "the wait begins.",
    )
    run_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Fail (and cancel) if the app runs longer than this many seconds.",
    )
    cancel_on_timeout: bool = Field(
        default=True, description="Cancel the app when a startup or run timeout expires."
    )
    stream_logs: bool = Field(
        default=True, description="Copy the app's log lines into the Prefect run log."
    )
    log_roles: list[str] | None = Field(
        default=None, description="Roles whose logs are streamed (default: all)."
    )
    log_stream: Literal["combined", "stdout", "stderr"] = Field(
        default="combined", description="Which output of each replica is streamed."
    )
    create_artifacts: bool = Field(
        default=True,
        description="Create the dryrun, UI link, placement and replica-state artifacts.",
    )
    targets: list[AnylaunchTarget] | None = Field(
        default=None,
        description=TARGETS_HELP,
    )
    max_infra_retries: int = Field(
        default=0,
        description=MAX_INFRA_RETRIES_HELP,
    )
    checkpoint_root: str | None = Field(
        default=None,
        description=CHECKPOINT_ROOT_HELP,
    )

    def __init__(self, *args: Any, **data: Any) -> None:
        # checked before pydantic sees the data: its errors would quote the (secret) input
        _no_unknown_fields(type(self), data)
        check_placement_fields(
            data.get("targets"),
            data.get("scheduler"),
            data.get("cfg"),
            data.get("max_infra_retries", 0),
            data.get("checkpoint_root"),
        )
        super().__init__(*args, **data)

    @field_validator("targets", mode="before")
    @classmethod
    def _targets_as_models(cls, value: object) -> object:
        # scheduler names, dicts, core Targets: one stored form (a block field must be JSON)
        if value is None:
            return None
        placement = placement_from_data("AnylaunchJob", value)
        return [AnylaunchTarget(**target_as_data(t)) for t in placement.resolved_targets]

    @field_serializer("app")
    def _app_secrets_masked(self, app: Any, info: SerializationInfo) -> Any:
        """Secret env values of the app are masked wherever the job is serialized (flow-run
        parameters, results, the UI), as Prefect masks its own secret fields; a block document
        being saved (``include_secrets``) keeps them."""
        if info.context and info.context.get("include_secrets") is True:
            return app
        if not isinstance(app, dict) or not isinstance(app.get("roles"), list):
            return app
        from anylaunch.specs.secrets import mask_env

        roles = [
            {**role, "env": mask_env(role["env"])}
            if isinstance(role, dict) and isinstance(role.get("env"), dict)
            else role
            for role in app["roles"]
        ]
        return {**app, "roles": roles}

    @field_validator("app", mode="before")
    @classmethod
    def _app_as_data(cls, value: object) -> object:
        # an AppDef is stored in its plain-data form (a block field must be JSON)
        return appdef_to_dict(value) if isinstance(value, AppDef) else value

    @model_validator(mode="after")
    def _check(self) -> AnylaunchJob:
        if self.component is not None and self.app is not None:
            raise InvalidSpecError(
                "AnylaunchJob.app",
                "<set>",
                "component and app are both set",
                "set only one: a component (with component_args) or an AppDef",
            )
        check_job_names(self.component, self.scheduler)
        check_placement_fields(  # again: a loaded block document skips __init__
            self.targets, self.scheduler, self.cfg, self.max_infra_retries, self.checkpoint_root
        )
        if self.app is not None:
            appdef_from_data(self.app)  # fail now, not at launch
        # pydantic's gt=0 lets inf and nan through: the watch would refuse them after launch
        check_seconds("AnylaunchJob.poll_interval_s", self.poll_interval_s, positive=True)
        for name in ("startup_timeout_s", "run_timeout_s"):
            if (value := getattr(self, name)) is not None:
                check_seconds(f"AnylaunchJob.{name}", value, positive=True)
        if (
            self.settings is not None
            and self.scheduler is not None
            and self.scheduler != self.settings.scheduler
        ):
            raise InvalidSpecError(
                "AnylaunchJob.scheduler",
                self.scheduler,
                f"differs from the settings block's scheduler {self.settings.scheduler!r}",
                "leave scheduler unset to use the settings block's, or drop the settings",
            )
        return self

    # --- what gets launched (no side effects) ------------------------------------------

    def runner(self) -> Runner:
        """A new Runner for this job's session (close it, or use it in a ``with`` block)."""
        return get_runner(self.session_name)

    def scheduler_name(self) -> str:
        """The scheduler the app is launched on (with ``targets``: the first target's)."""
        if self.scheduler is not None:
            return self.scheduler
        if self.targets:
            return self.targets[0].scheduler
        if self.settings is not None:
            return self.settings.scheduler
        from anylaunch.schedulers import get_default_scheduler_name

        return get_default_scheduler_name()

    def run_cfg(self) -> dict[str, Any]:
        """The run options given to the scheduler (secrets revealed: never log this); with
        ``targets``, the first target's."""
        if self.targets:
            return self._target_cfg(self.targets[0])
        base = self.settings.run_cfg() if self.settings is not None else {}
        return {**base, **self.cfg}

    def _target_cfg(self, target: AnylaunchTarget) -> dict[str, Any]:
        # the settings block's run options belong to its scheduler: only its targets get them
        on_settings = self.settings is not None and target.scheduler == self.settings.scheduler
        base = self.settings.run_cfg() if self.settings is not None and on_settings else {}
        return {**base, **target.cfg}

    def placement(self) -> Placement | None:
        """The placement the app is launched with (None: on one scheduler, no ``targets``).
        A target on the settings block's scheduler gets the block's run options (secrets
        revealed: never log this) under its own."""
        if self.targets is None:
            return None
        targets = [{**t.model_dump(), "cfg": self._target_cfg(t)} for t in self.targets]
        return placement_from_data(
            "AnylaunchJob", targets, self.max_infra_retries, self.checkpoint_root
        )

    def redactor(self, app: AppDef | None = None) -> Redactor:
        """Masks this job's secrets: every value of the settings block's ``secret_cfg`` and
        ``secret_env``, and the env values of ``app`` (default: the ``app`` field) whose
        names are declared in ``secret_env`` or say they are secret (the core rule,
        :func:`anylaunch.specs.secrets.is_secret_env_name`: ``API_TOKEN``, ``DB_PASSWORD``...).
        """
        declared = self.settings.env() if self.settings is not None else {}
        redact = self.settings.redactor() if self.settings is not None else Redactor()
        if app is None and self.app is not None:
            app = appdef_from_data(self.app)
        return (redact | app_redactor(app, declared)) if app is not None else redact

    def build_app(self, runner: Runner | None = None) -> AppDef:
        """The AppDef to launch: the ``app`` field, or the component called with its
        arguments (by ``runner``, default: one of this job's session, so that its
        component defaults apply); secret env vars of the settings block are set in every
        role.

        Raises:
            InvalidSpecError: nothing to launch, an unknown component (with a did-you-mean),
                bad component arguments, or ``log_roles`` naming a role the app lacks.
        """
        if self.app is not None:
            app = appdef_from_data(self.app)
        elif self.component is not None:
            if runner is None:
                with self.runner() as own:
                    return self.build_app(own)
            app = runner.materialize_component(self.component, self.component_args)
        else:
            raise InvalidSpecError(
                "AnylaunchJob.component",
                None,
                "nothing to launch",
                "set component (e.g. 'utils.echo') with component_args, or app (an AppDef)",
            )
        roles = [role.name for role in app.roles]
        for name in self.log_roles or []:
            if name not in roles:
                hint = did_you_mean(name, roles).strip()
                raise InvalidSpecError(
                    "AnylaunchJob.log_roles",
                    name,
                    f"app {app.name!r} has no such role",
                    f"{hint + ' ' if hint else ''}(roles: {', '.join(roles)})",
                )
        if self.settings is not None:
            for role in app.roles:
                role.env.update(self.settings.env())
        return app

    def dryrun(self, runner: Runner | None = None) -> AppDryRunInfo[Any]:
        """The scheduler request ``trigger()`` would submit (with ``targets``: the request
        for the first target; each attempt of a placed app is dry-run when it is tried);
        submits nothing.

        Raises:
            UnknownSchedulerException, InvalidRunConfigException, InvalidSpecError: bad input
                (everything is checked here, before anything is launched)
        """
        if runner is None:
            with self.runner() as own:
                return self.dryrun(own)
        return runner.dryrun(
            self.build_app(runner),
            self.scheduler_name(),
            self.run_cfg(),
            self.workspace,
            parent_run_id=_prefect.current_owner(),
        )

    def dryrun_markdown(self, info: AppDryRunInfo[Any]) -> str:
        """The dryrun as markdown, secret values masked."""
        app = info._app
        name = app.name if app is not None else "app"
        redact = self.redactor(app)
        request = redact(str(info)).replace("```", "'''")
        cfg = redact(", ".join(f"{k}={v}" for k, v in sorted(self.run_cfg().items())))
        return (
            f"### anylaunch request: `{name}` on `{self.scheduler_name()}`\n\n"
            f"session `{self.session_name}`; cfg: `{cfg or '(defaults)'}`\n\n"
            f"```\n{request}\n```\n"
        )

    # --- launch ------------------------------------------------------------------------

    def attach(self, app_handle: AppHandle) -> AnylaunchJobRun:
        """An ``AnylaunchJobRun`` for an app launched before (e.g. by another task run),
        watched with this job's settings."""
        name = appdef_from_data(self.app).name if self.app is not None else None
        return AnylaunchJobRun(self, app_handle, app_name=name)

    def _app_or_none(self) -> AppDef | None:
        """The app this job launches, or None if it cannot be built (e.g. a job holding
        only watch settings): what an attached run masks the env secrets of."""
        if self.app is None and self.component is None:
            return None
        try:
            return self.build_app()
        except Exception as e:  # the declared secrets are masked all the same
            redact = self.settings.redactor() if self.settings is not None else Redactor()
            self.logger.warning(
                "cannot rebuild the app to mask its env secrets: %s", redact(str(e))
            )
            return None

    async def atrigger(self) -> AnylaunchJobRun:
        """Async :meth:`trigger`."""
        return await run_sync_in_worker_thread(self._trigger)

    @async_dispatch(atrigger)
    def trigger(self) -> AnylaunchJobRun:  # type: ignore[override]
        """Dry-runs the app (a markdown artifact shows the request), schedules it, labels
        the flow run with its handle and links its UI; returns the run to watch.

        Raises:
            InvalidSpecError (and subclasses): bad input; nothing was launched
        """
        return self._trigger()

    def _trigger(self) -> AnylaunchJobRun:
        with self.runner() as runner:
            placement = self.placement()
            if placement is None:
                info = self.dryrun(runner)
                app = info._app
                request = self.dryrun_markdown(info)
            else:
                # no dryrun here: each attempt is dry-run (workspace built) when it is tried
                app = self.build_app(runner)
                request = targets_markdown(app.name, placement, self.redactor(app))
            app_name = app.name if app is not None else "app"
            redact = self.redactor(app)
            if self.create_artifacts:
                _prefect.create_artifact(
                    "markdown",
                    markdown=request,
                    key=_prefect.artifact_key(app_name, "request"),
                    description=f"anylaunch dryrun of {app_name}",
                )
            if placement is None:
                handle = runner.schedule(info)
            else:  # NoTargetCanRunError: every target said no, nothing was submitted
                assert app is not None
                handle = runner.run(
                    app,
                    workspace=self.workspace,
                    parent_run_id=_prefect.current_owner(),
                    placement=placement,
                )
            try:
                self.logger.info("launched %s", handle)
                _prefect.remember_launch(handle)
                if self.create_artifacts:
                    try:
                        first_word(runner, handle)  # then a feed's cache answers, if it has one
                        status = runner.status(handle)
                    except Exception:  # the link is a convenience: the wait polls anyway
                        status = None
                    if status is not None and status.ui_url:
                        _prefect.create_artifact(
                            "link",
                            link=redact(status.ui_url),
                            link_text=handle,
                            key=_prefect.artifact_key(app_name, "link"),
                            description=f"where to follow {handle}",
                        )
                    if status is not None and status.placement is not None:
                        placement_artifact(handle, app_name, status, redact)
            except BaseException:
                # interrupted between launch and handing the handle over: nobody could
                # cancel the app later, so do it now
                cancel_app(handle, runner=runner)
                raise
        return AnylaunchJobRun(self, handle, app_name=app_name, app=app)


class AnylaunchJobRun(JobRun[dict[str, Any]]):
    """A launched app: wait for it (its log lines stream into the run log), read its
    status, fetch its final status as a dict, or cancel it.

    Args:
        job: the job whose watch settings apply (poll interval, timeouts, logs)
        app_handle: the app, ``{scheduler}://{session}/{app_id}``
        app_name: the app's name, for artifact keys (default: the app id)
        app: the app as launched, whose env secrets are masked (default: rebuilt from
            ``job`` when first needed)
    """

    def __init__(
        self,
        job: AnylaunchJob,
        app_handle: AppHandle,
        app_name: str | None = None,
        app: AppDef | None = None,
    ) -> None:
        parse_app_handle(app_handle)  # MalformedAppHandleException names the fix
        check_type("job", job, AnylaunchJob, "must be an AnylaunchJob", "pass AnylaunchJob(...)")
        self.job = job
        self.app_handle = app_handle
        self.app_name = app_name or parse_app_handle(app_handle).app_id
        self.final_status: AppStatus | None = None
        self._app = app

    @cached_property
    def app(self) -> AppDef | None:
        """The app as launched (or rebuilt from the job; None if it cannot be)."""
        return self._app if self._app is not None else self.job._app_or_none()

    @cached_property
    def redact(self) -> Redactor:
        """Masks the secrets of the job and of the app (see :meth:`AnylaunchJob.redactor`)
        in everything this run logs, raises, returns and attaches."""
        return self.job.redactor(self.app)

    def __repr__(self) -> str:
        return f"AnylaunchJobRun({self.app_handle!r})"

    # --- wait ----------------------------------------------------------------------------

    def _drive(self, runner: Runner) -> None:
        """Makes ``runner`` the driver of a placed app (its status calls move the app to
        the next attempt when the placement says so), with the job's targets: the task that
        waits may run in another process than the one that launched, or be a retry."""
        if not is_placed(self.app_handle):
            return
        placement = self.job.placement()
        if placement is None or self.app is None:
            self.logger.warning(
                "%s is a placed app but this job has no targets (or no app): it is followed,"
                " not driven; pass the job that launched it to move it when needed",
                self.app_handle,
            )
            return
        runner.attach(
            self.app_handle, self.app, placement, self.job.workspace, _prefect.current_owner()
        )

    def _session(self, runner: Runner) -> AppSession:
        self._drive(runner)
        job = self.job
        from anylaunch.schedulers.api import Stream

        return AppSession(
            runner,
            self.app_handle,
            sink=logger_sink(self.logger),
            poll_interval=job.poll_interval_s,
            startup_timeout=job.startup_timeout_s,
            run_timeout=job.run_timeout_s,
            cancel_on_timeout=job.cancel_on_timeout,
            names=SECONDS_OPTION_NAMES,
            secrets=self.redact,
            logs="pump" if job.stream_logs and job.log_roles != [] else "off",
            log_roles=job.log_roles,
            log_stream=Stream(job.log_stream),
        )

    def _ended(self, outcome: Outcome) -> AppStatus:
        """Records the outcome (the replicas table of an app that ended) and maps it to the
        run's result or exception."""
        status, redact = outcome.status, self.redact
        decision = outcome.decision
        if status is not None and status.placement is not None and self.job.create_artifacts:
            placement_artifact(self.app_handle, self.app_name, status, redact)
        if outcome.kind in ("succeeded", "failed"):
            self.final_status = status
            if status is not None and self.job.create_artifacts:
                _prefect.create_artifact(
                    "table",
                    **end_table(
                        status, self.app_name, self.app_handle, redact, sweep_params(self.app)
                    ),
                )
                tracked_artifact(self.app_handle, self.app_name, status, redact)
        masked = None if status is None else masked_status(status, redact)
        array = status.array if status is not None else None
        if outcome.succeeded:  # by min_success_ratio, the session said which indices failed
            assert status is not None
            return status
        if outcome.kind == "failed":
            message = with_failed_indices(outcome.message, array)
            raise AnylaunchAppFailedError(self.app_handle, masked, message=redact(message))
        if outcome.kind in ("startup_timeout", "run_timeout"):
            which = "startup" if outcome.kind == "startup_timeout" else "run"
            limit = self.job.startup_timeout_s if which == "startup" else self.job.run_timeout_s
            last = (
                decision.status.state
                if isinstance(decision, (StartupTimedOut, RunTimedOut))
                else AppState.UNKNOWN
            )
            raise AnylaunchAppTimeoutError(
                self.app_handle,
                which,
                float(limit or 0),
                last,
                outcome.cancelled,
                message=outcome.message,
            )
        assert isinstance(decision, Lost)
        raise AnylaunchAppLostError(
            self.app_handle, masked, outcome.message, reason=decision.reason
        )

    async def await_for_completion(self) -> None:
        """Async :meth:`wait_for_completion`."""
        with self.job.runner() as runner:
            # may rebuild the app (for its env secrets): not on the event loop
            session: AppSession = await run_sync_in_worker_thread(self._session, runner)
            outcome = await session.arun()
        await run_sync_in_worker_thread(self._ended, outcome)

    @async_dispatch(await_for_completion)
    def wait_for_completion(self) -> None:  # type: ignore[override]
        """Waits for the app to end, streaming its log lines into the run logger.

        Raises:
            AnylaunchAppFailedError: the app ended FAILED or CANCELLED (with its message)
            AnylaunchAppTimeoutError: the startup or run timeout expired (the app is
                cancelled unless ``cancel_on_timeout`` is off)
            AnylaunchAppLostError: the scheduler no longer knows the app, or its status
                calls kept failing (the app is cancelled unless ``cancel_on_timeout`` is off)
        """
        self._wait()

    def _wait(self) -> AppStatus:
        with self.job.runner() as runner:
            outcome = self._session(runner).run()
        return self._ended(outcome)

    # --- status, result, cancel ----------------------------------------------------------

    def _status(self) -> AppStatus:
        with self.job.runner() as runner:
            self._drive(runner)
            status = runner.status(self.app_handle)
        if status is None:
            raise UnknownAppException(self.app_handle)
        return status

    async def astatus(self) -> AppStatus:
        """Async :meth:`status`."""
        return await run_sync_in_worker_thread(self._status)

    @async_dispatch(astatus)
    def status(self) -> AppStatus:
        """The app's current status.

        Raises:
            UnknownAppException: the scheduler does not know the app
        """
        return self._status()

    def _fetch_result(self) -> dict[str, Any]:
        return self.result_of(self._status())

    def result_of(self, status: AppStatus) -> dict[str, Any]:
        """``status`` as this run's result: a dict with ``app_handle``, secrets masked; for
        an array app also ``indices`` (``index -> {state, exit_code}``, compact for large
        arrays) and ``failed_indices`` (see :func:`prefect_anylaunch.arrays.array_result`);
        for a placed app ``attempt`` and ``placement`` (every target tried, see
        :func:`prefect_anylaunch.placement.placement_result`); for an ended app ``tracker`` and
        ``archive_url`` (see :func:`prefect_anylaunch.tracked.ended_extras`)."""
        masked = masked_status(status, self.redact)
        result = array_result({"app_handle": self.app_handle, **masked.to_dict()}, masked)
        return placement_result(result, masked) | ended_extras(self.app_handle, status, self.redact)

    async def afetch_result(self) -> dict[str, Any]:
        """Async :meth:`fetch_result`."""
        return await run_sync_in_worker_thread(self._fetch_result)

    @async_dispatch(afetch_result)
    def fetch_result(self) -> dict[str, Any]:  # type: ignore[override]
        """The app's status as a dict (``app_handle``, ``state``, ``msg``, ``roles``, ...):
        the final status once the app has ended; secrets masked."""
        return self._fetch_result()

    def _cancel(self) -> None:
        with self.job.runner() as runner:
            cancel_app(self.app_handle, runner=runner)
        self.logger.info("requested cancellation of %s", self.app_handle)

    async def acancel(self) -> None:
        """Async :meth:`cancel`."""
        await run_sync_in_worker_thread(self._cancel)

    @async_dispatch(acancel)
    def cancel(self) -> None:
        """Asks the scheduler to stop the app (returns at once; a no-op once it ended)."""
        self._cancel()
