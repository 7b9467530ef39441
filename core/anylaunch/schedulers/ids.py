"""Random ids and unique names: TorchX's ``torchx.schedulers.ids``.

The entropy comes from ``os.urandom``, so ``random.seed()`` never repeats an id. The functions
live in :mod:`anylaunch.schedulers.common.app_ids`, with the app ids of the schedulers that
make their own, which draw their random numbers from :func:`random_uint64` too.

>>> name = make_unique("trainer")
>>> name.startswith("trainer-"), name != make_unique("trainer")
(True, True)
>>> random_id(8)[0].isalpha()
True
"""

from anylaunch.schedulers.common.app_ids import make_unique, random_id, random_uint64

__all__ = ["make_unique", "random_id", "random_uint64"]
