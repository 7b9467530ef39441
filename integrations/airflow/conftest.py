"""pytest only (not imported by the package): the doctests of these modules import Airflow,
which writes under $AIRFLOW_HOME (default ~/airflow) when first imported. Point it at a
temporary directory first, as tests/integrations/airflow/conftest.py does (same marker, so
whichever is loaded first wins and the other reuses it)."""

import atexit
import os
import shutil
import tempfile

_MARKER = "_ANYLAUNCH_AIRFLOW_TEST_HOME"
if _MARKER not in os.environ:
    _home = tempfile.mkdtemp(prefix="anylaunch-airflow-")
    os.environ[_MARKER] = _home
    os.environ["AIRFLOW_HOME"] = _home
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    atexit.register(shutil.rmtree, _home, True)
