"""Host devices for a resource's named devices: ``{EFA_DEVICE: 2}`` becomes the device mounts
``/dev/infiniband/uverbs0`` and ``/dev/infiniband/uverbs1``. Public as
:mod:`anylaunch.schedulers.devices` (TorchX's ``torchx.schedulers.devices``).

>>> from anylaunch.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE
>>> [m.src_path for m in get_device_mounts({EFA_DEVICE: 2, NEURON_DEVICE: 1})]
['/dev/infiniband/uverbs0', '/dev/infiniband/uverbs1', '/dev/neuron0']
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping

from anylaunch.specs.mounts import DeviceMount
from anylaunch.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE

__all__ = [
    "DEVICES",
    "efa_to_devicemounts",
    "get_device_mounts",
    "neuron_to_devicemounts",
    "to_devicemounts",
]


def to_devicemounts(num_devices: int, device_type: str) -> list[DeviceMount]:
    """Returns the mounts of devices ``{device_type}0`` to ``{device_type}{num_devices - 1}``,
    each at the same path in the container.

    >>> to_devicemounts(2, "/dev/neuron")
    [DeviceMount(src_path='/dev/neuron0', dst_path='/dev/neuron0', permissions='rwm'), DeviceMount(src_path='/dev/neuron1', dst_path='/dev/neuron1', permissions='rwm')]

    Args:
        num_devices: how many devices (0 or less: none)
        device_type: the path of the devices without the index (e.g. ``/dev/neuron``)

    Returns:
        one device mount per device
    """
    return [DeviceMount(f"{device_type}{i}", f"{device_type}{i}") for i in range(num_devices)]


#: The mounts of ``n`` AWS Neuron (Trainium, Inferentia) devices: ``/dev/neuron{i}``.
neuron_to_devicemounts: Callable[[int], list[DeviceMount]] = functools.partial(
    to_devicemounts, device_type="/dev/neuron"
)
#: The mounts of ``n`` AWS EFA interfaces: ``/dev/infiniband/uverbs{i}``.
efa_to_devicemounts: Callable[[int], list[DeviceMount]] = functools.partial(
    to_devicemounts, device_type="/dev/infiniband/uverbs"
)

#: Named device (a key of ``Resource.devices``) -> the device mounts of ``n`` of them.
DEVICES: Mapping[str, Callable[[int], list[DeviceMount]]] = {
    EFA_DEVICE: efa_to_devicemounts,
    NEURON_DEVICE: neuron_to_devicemounts,
}


def get_device_mounts(devices: Mapping[str, int]) -> list[DeviceMount]:
    """Returns the device mounts of named devices and counts (a ``Resource.devices``), as
    :data:`DEVICES` maps them; a device it does not know is skipped with a warning.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     get_device_mounts({"example.com/fpga": 1})
    []
    >>> str(caught[0].message)
    "unknown named device 'example.com/fpga' (no device mounts for it); known: aws.amazon.com/neurondevice, vpc.amazonaws.com/efa"

    Args:
        devices: named device -> how many of them

    Returns:
        the device mounts, in the order of ``devices``
    """
    mounts: list[DeviceMount] = []
    for name, count in devices.items():
        to_mounts = DEVICES.get(name)
        if to_mounts is None:
            known = ", ".join(sorted(DEVICES))
            warnings.warn(
                f"unknown named device {name!r} (no device mounts for it); known: {known}",
                stacklevel=2,
            )
            continue
        mounts += to_mounts(count)
    return mounts
