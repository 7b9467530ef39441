"""Copying files as they grow into one writer: TorchX's ``torchx.schedulers.streams``.

:class:`Tee` lives in :mod:`anylaunch.schedulers.common.streams`, where every backend can use
it.
"""

from anylaunch.schedulers.common.streams import Tee

__all__ = ["Tee"]
