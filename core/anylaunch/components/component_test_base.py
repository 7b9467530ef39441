"""A base for unit tests of your own components: :class:`ComponentTestCase` (TorchX's
``torchx.components.component_test_base``).

A component is plain Python, so it can be tested as such; :meth:`ComponentTestCase.validate`
also checks what the CLI needs of it (the component linter's rules, and a parser of its
arguments, as ``anylaunch run path/to/file.py:fn --help`` builds), and
:meth:`ComponentTestCase.run_component` runs it on a scheduler.

>>> import unittest
>>> from anylaunch.components import utils
>>> class EchoTest(ComponentTestCase):
...     def test_echo(self) -> None:
...         self.validate(utils, "echo")
>>> EchoTest("test_echo").run().wasSuccessful()
True

Not a component module: discovery skips it.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import time
import unittest
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from anylaunch.specs.api import AppDef, AppStatus

__all__ = ["ComponentTestCase"]


class ComponentTestCase(unittest.TestCase):
    """A :class:`unittest.TestCase` with helpers to test components.

    ``self.test_dir`` is a fresh temporary directory for each test, removed after it.
    """

    test_dir: str

    def setUp(self) -> None:
        """Makes ``self.test_dir``."""
        self.test_dir = tempfile.mkdtemp(prefix="anylaunch_component_test_")

    def tearDown(self) -> None:
        """Removes ``self.test_dir``."""
        shutil.rmtree(self.test_dir, ignore_errors=True)

    def validate(self, module: ModuleType, function_name: str) -> None:
        """Fails the test unless the CLI can run ``function_name`` of ``module``.

        Finds it as ``/abs/path/to/module.py:function_name`` (as a component file is run),
        so the component linter checks it, then builds the parser of its arguments and asks
        it for ``--help`` (the help text is not printed).

        Args:
            module: the module that defines the component
            function_name: the component function's name

        Raises:
            ComponentNotFoundException: the module has no such function.
            ComponentValidationException: the function fails the component linter.
        """
        from anylaunch.components import get_component
        from anylaunch.specs.builders import parse_args

        path = getattr(module, "__file__", None)
        self.assertTrue(path, f"module {module.__name__} has no __file__")
        component = get_component(f"{os.path.abspath(str(path))}:{function_name}")
        with contextlib.redirect_stdout(io.StringIO()), self.assertRaises(SystemExit) as done:
            parse_args(component.fn, ["--help"])
        self.assertEqual(done.exception.code, 0)

    def run_component(
        self,
        component: Callable[..., AppDef],
        args: Mapping[str, Any] | None = None,
        scheduler_params: Mapping[str, Any] | None = None,
        scheduler: str = "local_cwd",
        interval: float = 0.1,
        timeout: float = 1,
    ) -> AppStatus | None:
        """Runs ``component(**args)`` on ``scheduler`` and waits up to ``timeout`` seconds.

        An app still running after ``timeout`` is left running (its last status is returned).

        Args:
            component: the component function
            args: its arguments
            scheduler_params: keyword arguments for the scheduler factories
            scheduler: the scheduler to run on
            interval: seconds between two status polls
            timeout: the most seconds to wait for the app to end

        Returns:
            the app's last status (``None`` if the scheduler does not know the app)
        """
        from anylaunch.runner import get_runner

        app = component(**(args or {}))
        with get_runner(None, None, **(scheduler_params or {})) as runner:
            handle = runner.run(app, scheduler)
            deadline = time.monotonic() + timeout
            status = runner.status(handle)
            while (status is None or not status.is_terminal()) and time.monotonic() < deadline:
                time.sleep(interval)
                status = runner.status(handle)
        return status
