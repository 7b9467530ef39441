"""``AnylaunchHook``: reads the ``anylaunch`` connection (default scheduler, cfg and session).

A connection of type ``anylaunch`` keeps cluster settings out of DAG files. Its extra holds:

- ``scheduler``: the scheduler tasks use when they name none (e.g. ``kubernetes``)
- ``cfg``: run options for that scheduler, as a JSON object or ``key=value,key=value``
- ``session``: the session name that goes into app handles

For example ``AIRFLOW_CONN_ANYLAUNCH_DEFAULT='{"conn_type": "anylaunch", "extra":
{"scheduler": "local_cwd", "cfg": {"log_dir": "/data/logs"}}}'``. The connection's cfg applies
only to its own scheduler; a task's ``cfg`` wins key by key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_anylaunch._common import DEFAULT_CONN_ID
from airflow_anylaunch._compat import AIRFLOW_V_3_3_PLUS, BaseHook

if TYPE_CHECKING:
    from anylaunch.runner import Runner

__all__ = ["AnylaunchHook", "AnylaunchSettings"]

_FORM_PREFIX = "extra__anylaunch__"
#: The settings a connection's extra may hold (anything else is a typo).
_EXTRA_KEYS = ("scheduler", "cfg", "session")


@dataclass(frozen=True)
class AnylaunchSettings:
    """What an ``anylaunch`` connection says (all optional).

    >>> s = AnylaunchSettings.from_extra({"scheduler": "local_cwd", "cfg": "log_dir=/tmp"})
    >>> s.scheduler, s.cfg, s.session
    ('local_cwd', 'log_dir=/tmp', None)
    >>> AnylaunchSettings.from_extra({"extra__anylaunch__session": "team-a"}).session
    'team-a'
    >>> AnylaunchSettings.from_extra({"cfg": 3}, conn_id="prod")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: connection 'prod' extra.cfg=3 is invalid: must be a JSON object or a 'key=value,key=value' string. Fix: e.g. {"cfg": {"log_dir": "/tmp/logs"}}
    >>> AnylaunchSettings.from_extra({"shceduler": "local_cwd"}, conn_id="prod")
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.InvalidSpecError: connection 'prod' extra.shceduler='<not shown>' is invalid: is not an anylaunch connection setting. Did you mean 'scheduler'? Fix: use only scheduler, cfg, session
    """

    scheduler: str | None = None
    #: run options as a mapping, or as the CLI's ``key=value,key=value`` string
    cfg: Mapping[str, Any] | str = field(default_factory=dict)
    session: str | None = None
    conn_id: str | None = None

    @classmethod
    def from_extra(cls, extra: Mapping[str, Any], conn_id: str | None = None) -> AnylaunchSettings:
        """Validates a connection's extra and returns the settings it holds."""
        from anylaunch.specs.errors import InvalidSpecError, did_you_mean

        where = f"connection {conn_id!r} extra" if conn_id else "connection extra"
        if not isinstance(extra, Mapping):
            raise InvalidSpecError(
                where, extra, "must be a JSON object", 'e.g. {"scheduler": "local_cwd"}'
            )
        # form fields may be saved under their prefixed names (extra__anylaunch__scheduler)
        extra = {
            **{k[len(_FORM_PREFIX) :]: v for k, v in extra.items() if k.startswith(_FORM_PREFIX)},
            **{k: v for k, v in extra.items() if not k.startswith(_FORM_PREFIX)},
        }
        unknown = sorted(k for k in extra if k not in _EXTRA_KEYS)
        if unknown:  # a misspelt key would be ignored: tasks would run with the defaults
            raise InvalidSpecError(
                f"{where}.{unknown[0]}",
                "<not shown>",  # its value may be a secret run option
                f"is not an anylaunch connection setting.{did_you_mean(unknown[0], _EXTRA_KEYS)}",
                f"use only {', '.join(_EXTRA_KEYS)}",
            )
        values: dict[str, str | None] = {}
        for key in ("scheduler", "session"):
            value = extra.get(key)
            if value in (None, ""):
                values[key] = None
            elif not isinstance(value, str):
                raise InvalidSpecError(
                    f"{where}.{key}", value, "must be a string", f'e.g. {{"{key}": "local_cwd"}}'
                )
            else:
                values[key] = value.strip()
        if values["scheduler"] is not None:
            from anylaunch.runner.engine_names import check_scheduler_name

            check_scheduler_name(f"{where}.scheduler", values["scheduler"])
        if values["session"] is not None:
            from anylaunch.specs.checks import check_session_name

            check_session_name(f"{where}.session", values["session"])
        cfg = extra.get("cfg") or {}
        if isinstance(cfg, str) and cfg.strip().startswith("{"):
            try:
                cfg = json.loads(cfg)
            except ValueError as e:
                raise InvalidSpecError(
                    f"{where}.cfg", cfg, f"is not valid JSON ({e})", "fix the JSON object"
                ) from None
        if not isinstance(cfg, (Mapping, str)) or (
            isinstance(cfg, Mapping) and not all(isinstance(k, str) for k in cfg)
        ):
            raise InvalidSpecError(
                f"{where}.cfg",
                cfg,
                "must be a JSON object or a 'key=value,key=value' string",
                'e.g. {"cfg": {"log_dir": "/tmp/logs"}}',
            )
        return cls(values["scheduler"], cfg, values["session"], conn_id)

    def cfg_for(self, runner: Runner, scheduler: str) -> dict[str, Any]:
        """The connection's cfg, typed for ``scheduler``; empty if the connection is for
        another scheduler (its options would not apply)."""
        if self.scheduler is not None and self.scheduler != scheduler:
            return {}
        if isinstance(self.cfg, str):
            return dict(runner.cfg_from_str(scheduler, self.cfg))
        return dict(self.cfg)


class AnylaunchHook(BaseHook):
    """Reads an ``anylaunch`` connection and creates runners from it.

    The default connection (``anylaunch_default``) is optional: without it the settings are
    empty and tasks must name their scheduler. A connection named explicitly must exist.

    Args:
        anylaunch_conn_id: the connection id (None: no connection, empty settings)
    """

    conn_name_attr = "anylaunch_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "anylaunch"
    hook_name = "anylaunch"

    def __init__(self, anylaunch_conn_id: str | None = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if anylaunch_conn_id is not None and (
            not isinstance(anylaunch_conn_id, str) or not anylaunch_conn_id
        ):
            from anylaunch.specs.errors import InvalidSpecError

            raise InvalidSpecError(
                "anylaunch_conn_id",
                anylaunch_conn_id,
                "must be a connection id or None",
                f"e.g. {DEFAULT_CONN_ID!r}",
            )
        self.anylaunch_conn_id = anylaunch_conn_id
        self._settings: AnylaunchSettings | None = None

    def get_settings(self) -> AnylaunchSettings:
        """The connection's settings (read once per hook).

        Raises:
            AirflowNotFoundException: a connection named explicitly does not exist
            InvalidSpecError: the connection has another type, or a malformed extra
        """
        if self._settings is not None:
            return self._settings
        conn_id = self.anylaunch_conn_id
        if conn_id is None:
            self._settings = AnylaunchSettings()
            return self._settings
        from airflow_anylaunch._compat import AirflowNotFoundException

        try:
            conn = self.get_connection(conn_id)
        except AirflowNotFoundException:
            if conn_id != DEFAULT_CONN_ID:
                raise
            self.log.debug("no %s connection: no default scheduler or cfg", conn_id)
            self._settings = AnylaunchSettings(conn_id=conn_id)
            return self._settings
        if conn.conn_type not in (None, "", self.conn_type):
            from anylaunch.specs.errors import InvalidSpecError

            raise InvalidSpecError(
                f"connection {conn_id!r} conn_type",
                conn.conn_type,
                f"is not an {self.conn_type} connection",
                f"set its type to {self.conn_type!r}, or pass another anylaunch_conn_id",
            )
        self._settings = AnylaunchSettings.from_extra(conn.extra_dejson, conn_id)
        return self._settings

    def get_conn(self) -> Runner:
        """A runner whose handles carry the connection's session name (close it when done)."""
        from anylaunch.runner import get_runner

        return get_runner(self.get_settings().session)

    def test_connection(self) -> tuple[bool, str]:
        """Checks the scheduler exists and the cfg fits its run options (no network)."""
        try:
            settings = self.get_settings()
            if settings.scheduler is None:
                return True, "no default scheduler: tasks must name theirs"
            with self.get_conn() as runner:
                cfg = settings.cfg_for(runner, settings.scheduler)
                runner.scheduler_run_opts(settings.scheduler).resolve(cfg)
        except Exception as e:
            return False, str(e)
        return True, f"scheduler {settings.scheduler} accepts the cfg"

    if not AIRFLOW_V_3_3_PLUS:  # 3.3 builds the form from the provider's ``conn-fields``

        @classmethod
        def get_connection_form_widgets(cls) -> dict[str, Any]:
            """The connection form's fields (Airflow < 3.3; empty without the Flask UI)."""
            try:
                from flask_appbuilder.fieldwidgets import (  # type: ignore[import-not-found,import-untyped,unused-ignore]
                    BS3TextFieldWidget,
                )
                from flask_babel import lazy_gettext  # type: ignore[import-not-found,import-untyped,unused-ignore]
                from wtforms import StringField  # type: ignore[import-not-found,import-untyped,unused-ignore]
            except ImportError:
                return {}
            from airflow_anylaunch.provider import CONN_FIELDS

            return {
                name: StringField(
                    lazy_gettext(spec["label"]),
                    widget=BS3TextFieldWidget(),
                    description=spec["description"],
                )
                for name, spec in CONN_FIELDS.items()
            }

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Hides the fields an anylaunch connection does not use."""
        return {
            "hidden_fields": ["host", "schema", "login", "password", "port"],
            "relabeling": {},
            "placeholders": {
                "extra": '{"scheduler": "local_cwd", "cfg": {"log_dir": "/tmp/logs"}, "session": "my-team"}'
            },
        }
