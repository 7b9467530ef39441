"""Model interpretability (TorchX's ``torchx.components.interpret``): no built-in component.

Interpretability is specific to each model, so anylaunch, like TorchX, ships no
interpretability app. Build one with `Captum <https://captum.ai/>`_, which provides analyzers
and renderers for understanding a model, and launch it with a component of your own (see
:mod:`anylaunch.components` for authoring components) or with
:func:`anylaunch.components.utils.python`:

>>> from anylaunch.components.utils import python
>>> app = python("--model", "s3://bucket/model.pt", m="my_project.interpret")
>>> app.roles[0].args
['-m', 'my_project.interpret', '--model', 's3://bucket/model.pt']
"""

from __future__ import annotations

__all__: list[str] = []
