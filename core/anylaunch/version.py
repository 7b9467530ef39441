"""The package version and the default image of the built-in components (TorchX's
``torchx.version``).

>>> import anylaunch
>>> __version__ == anylaunch.__version__
True
>>> ANYLAUNCH_IMAGE
'.'
"""

from anylaunch import __version__
from anylaunch.components import DEFAULT_IMAGE

__all__ = ["ANYLAUNCH_IMAGE", "__version__"]

#: The image the built-in components run in unless given one: TorchX's ``TORCHX_IMAGE``. It is
#: :data:`anylaunch.components.DEFAULT_IMAGE`, the current directory (no anylaunch image is
#: published), which is what the local schedulers run in; container schedulers need
#: ``--image``.
ANYLAUNCH_IMAGE: str = DEFAULT_IMAGE
