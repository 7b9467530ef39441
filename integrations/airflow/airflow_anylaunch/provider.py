"""Airflow provider metadata (entry point ``apache_airflow_provider``)."""

from typing import Any

from anylaunch import __version__


def get_provider_info() -> dict[str, Any]:
    """Returns the provider description Airflow's ProvidersManager reads.

    >>> get_provider_info()["package-name"]
    'anylaunch'
    """
    return {
        "package-name": "anylaunch",  # must equal the distribution name
        "name": "anylaunch",
        "description": "Launch, watch, stream logs from and cancel anylaunch apps.",
        "versions": [__version__],
    }
