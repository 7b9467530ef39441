"""Airflow provider metadata (entry point ``apache_airflow_provider``).

``airflow providers list`` shows anylaunch; ``airflow providers triggers`` / ``links`` /
``hooks`` list its trigger, extra link and connection type.
"""

from typing import Any

from anylaunch import __version__

_INTEGRATION = "anylaunch"

#: The connection form's fields, stored in the connection's extra under these names (Airflow
#: 3.3 reads them from ``conn-fields``; older Airflow from the hook's form widgets).
CONN_FIELDS: dict[str, dict[str, Any]] = {
    "scheduler": {
        "label": "Default scheduler",
        "description": "used by tasks that name none, e.g. local_cwd",
        "schema": {"type": ["string", "null"]},
    },
    "cfg": {
        "label": "Run options",
        "description": "for that scheduler: key=value,key=value or a JSON object",
        "schema": {"type": ["string", "null"]},
    },
    "session": {
        "label": "Session name",
        "description": "goes into app handles (default: anylaunch)",
        "schema": {"type": ["string", "null"]},
    },
}


def get_provider_info() -> dict[str, Any]:
    """Returns the provider description Airflow's ProvidersManager reads.

    >>> info = get_provider_info()
    >>> info["package-name"], info["connection-types"][0]["connection-type"]
    ('anylaunch', 'anylaunch')
    >>> info["extra-links"]
    ['airflow_anylaunch.links.AnylaunchAppLink', 'airflow_anylaunch.links.AnylaunchArchiveLink']
    """
    return {
        "package-name": "anylaunch",  # must equal the distribution name
        "name": "anylaunch",
        "description": "Launch, watch, stream logs from and cancel anylaunch apps.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://pypi.org/project/anylaunch/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {"integration-name": _INTEGRATION, "python-modules": ["airflow_anylaunch.operators"]}
        ],
        "sensors": [
            {"integration-name": _INTEGRATION, "python-modules": ["airflow_anylaunch.sensors"]}
        ],
        "hooks": [
            {"integration-name": _INTEGRATION, "python-modules": ["airflow_anylaunch.hooks"]}
        ],
        "triggers": [
            {"integration-name": _INTEGRATION, "python-modules": ["airflow_anylaunch.triggers"]}
        ],
        "extra-links": [
            "airflow_anylaunch.links.AnylaunchAppLink",
            "airflow_anylaunch.links.AnylaunchArchiveLink",
        ],
        "connection-types": [
            {
                "connection-type": "anylaunch",
                "hook-class-name": "airflow_anylaunch.hooks.AnylaunchHook",
                "hook-name": "anylaunch",
                # form fields (stored in the connection's extra under these names)
                "conn-fields": CONN_FIELDS,
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "login", "password", "port"],
                    "placeholders": {
                        "extra": '{"scheduler": "local_cwd", "cfg": {"log_dir": "/tmp/logs"}, '
                        '"session": "my-team"}'
                    },
                },
            }
        ],
    }
