"""Device mounts for a resource's named devices: TorchX's ``torchx.schedulers.devices``.

The functions live in :mod:`anylaunch.schedulers.common.devices`, where every backend can use
them.

>>> from anylaunch.specs.named_resources_aws import EFA_DEVICE
>>> [m.dst_path for m in get_device_mounts({EFA_DEVICE: 1})]
['/dev/infiniband/uverbs0']
"""

from anylaunch.schedulers.common.devices import (
    DEVICES,
    efa_to_devicemounts,
    get_device_mounts,
    neuron_to_devicemounts,
    to_devicemounts,
)

__all__ = [
    "DEVICES",
    "efa_to_devicemounts",
    "get_device_mounts",
    "neuron_to_devicemounts",
    "to_devicemounts",
]
