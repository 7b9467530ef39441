"""The extra links on a task's page: "anylaunch app", the app's UI (``ui_url``), and
"anylaunch archive", its record in the archive (``archive_url``) once it ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_anylaunch._common import XCOM_UI_URL
from airflow_anylaunch._compat import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

__all__ = ["AnylaunchAppLink", "AnylaunchArchiveLink"]


class AnylaunchAppLink(BaseOperatorLink):
    """Links a task to its app's UI, read from the ``ui_url`` XCom the operator pushes as soon
    as the app is scheduled (so the link also works while the app runs); a task that deferred
    right after launching fills it in when it ends.

    >>> AnylaunchAppLink().name
    'anylaunch app'
    """

    name = "anylaunch app"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow_anylaunch._compat import AIRFLOW_V_3_0_PLUS, XCom

        # Airflow 3 asks the operator that ran; Airflow 2's webserver one that never ran
        # (and its XCom read of the metadata DB finds nothing quietly)
        if AIRFLOW_V_3_0_PLUS and getattr(operator, "ui_url_pushed", True) is False:
            return ""  # never scheduled (e.g. bad input): no XCom to read, no error to log

        url = XCom.get_value(ti_key=ti_key, key=XCOM_UI_URL)
        return str(url) if url else ""


class AnylaunchArchiveLink(BaseOperatorLink):
    """Links a task to its app's record in the archive (``ANYLAUNCH_ARCHIVE_URL``: the final
    status and every log line, kept after the backend forgot the app), read from the
    ``archive_url`` XCom pushed when the app ended; empty without an archive.

    >>> AnylaunchArchiveLink().name
    'anylaunch archive'
    """

    name = "anylaunch archive"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow_anylaunch._compat import AIRFLOW_V_3_0_PLUS, XCom
        from airflow_anylaunch._outcome import XCOM_ARCHIVE_URL

        if AIRFLOW_V_3_0_PLUS and getattr(operator, "ui_url_pushed", True) is False:
            return ""  # never scheduled: nothing archived
        url = XCom.get_value(ti_key=ti_key, key=XCOM_ARCHIVE_URL)
        return str(url) if url else ""
