"""Training (TorchX's ``torchx.components.train``): no built-in training loop.

Training a model takes a training loop and code of its own, so anylaunch, like TorchX, ships
no training app; it has the generic components that run yours:

1. :mod:`anylaunch.components` explains how to author a component;
2. :func:`anylaunch.components.dist.ddp` runs distributed (and single-node multi-process)
   training;
3. :func:`anylaunch.components.utils.python` runs a module, a script or an inline program.

**Embedded train script.** A small app can be embedded as the program text of the Python command (``-c``); the length a
scheduler accepts for arguments limits its size:

>>> from anylaunch.components.utils import python
>>> app = '''
... import sys
... print(f"Hello, {sys.argv[1]}")
... '''
>>> python("anylaunch user", c=app)
AppDef(..., entrypoint='python3', ...)
"""

from __future__ import annotations

__all__: list[str] = []
