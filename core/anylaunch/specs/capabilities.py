"""Typed keys of :attr:`Resource.capabilities <anylaunch.specs.Resource.capabilities>`
(TorchX's ``torchx.specs.capabilities``).

``Resource.capabilities`` is a plain ``dict[str, Any]`` that schedulers interpret. A
:class:`CapabilityKey` spells a key once, with the type of its value, so that the code that
sets a capability and the code that reads it agree. What is stored does not change: the value
sits under the plain string key ``"<namespace>.<name>"``, so serialized resources and code
that indexes ``capabilities`` directly keep working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, overload

from anylaunch.specs.api import Resource
from anylaunch.specs.errors import InvalidSpecError

__all__ = ["CapabilityKey", "CapabilityTypeError"]

V = TypeVar("V")


class CapabilityTypeError(InvalidSpecError, TypeError):
    """A capability's value is not of its key's type (a :class:`TypeError`, as in TorchX, and
    the project's :class:`~anylaunch.specs.errors.InvalidSpecError`)."""


def _type_name(tp: type[object]) -> str:
    return getattr(tp, "__name__", repr(tp))


@dataclass(frozen=True)
class CapabilityKey(Generic[V]):
    """A typed, namespaced key of ``Resource.capabilities``.

    >>> from anylaunch.specs import CapabilityKey, Resource
    >>> NETWORK = CapabilityKey("aws", "network_bandwidth_gbps", int)
    >>> NETWORK.key
    'aws.network_bandwidth_gbps'
    >>> res = Resource(cpu=4, gpu=0, memMB=1024)
    >>> NETWORK.set(res, 400)
    >>> res.capabilities
    {'aws.network_bandwidth_gbps': 400}
    >>> NETWORK.get(res)
    400
    >>> CapabilityKey("aws", "efa_enabled", bool).get(res, default=False)
    False
    >>> res.capabilities[NETWORK.key] = "fast"
    >>> NETWORK.get(res)
    Traceback (most recent call last):
    ...
    anylaunch.specs.capabilities.CapabilityTypeError: Resource.capabilities['aws.network_bandwidth_gbps']='fast' is invalid: must be a int, not a str. Fix: store a int under 'aws.network_bandwidth_gbps' (CapabilityKey.set checks it)

    Args:
        namespace: what groups the key, e.g. a cloud or a scheduler name
        name: the capability's name within the namespace
        type: the type of its value; a ``bool`` is not taken for an ``int`` key

    Raises:
        InvalidSpecError: ``namespace`` or ``name`` is not a non-empty str, or ``type`` is no
            class
    """

    namespace: str
    name: str
    type: type[V]

    def __post_init__(self) -> None:
        for field in ("namespace", "name"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise InvalidSpecError(
                    f"CapabilityKey.{field}",
                    value,
                    "must be a non-empty str",
                    "pass e.g. CapabilityKey('aws', 'efa_enabled', bool)",
                )
        if not isinstance(self.type, type):
            raise InvalidSpecError(
                "CapabilityKey.type",
                self.type,
                "is not a class",
                "pass the value's class, e.g. int, str or bool",
            )

    @property
    def key(self) -> str:
        """The plain string key in ``Resource.capabilities``: ``"<namespace>.<name>"``."""
        return f"{self.namespace}.{self.name}"

    def _check_value(self, value: object) -> None:
        bool_for_int = self.type is int and type(value) is bool
        if bool_for_int or not isinstance(value, self.type):
            wanted = _type_name(self.type)
            raise CapabilityTypeError(
                f"Resource.capabilities[{self.key!r}]",
                value,
                f"must be a {wanted}, not a {type(value).__name__}",
                f"store a {wanted} under {self.key!r} (CapabilityKey.set checks it)",
            )

    def set(self, resource: Resource, value: V) -> None:
        """Stores ``value`` under :attr:`key` in ``resource.capabilities``.

        Raises:
            InvalidSpecError: ``resource`` is not a Resource
            CapabilityTypeError: ``value`` is not of the key's type
        """
        self._check_resource(resource)
        self._check_value(value)
        resource.capabilities[self.key] = value

    @overload
    def get(self, resource: Resource) -> V | None: ...

    @overload
    def get(self, resource: Resource, default: V) -> V: ...

    def get(self, resource: Resource, default: V | None = None) -> V | None:
        """The value stored under :attr:`key`, or ``default`` if there is none.

        Raises:
            InvalidSpecError: ``resource`` is not a Resource
            CapabilityTypeError: the stored value is not of the key's type
        """
        self._check_resource(resource)
        if self.key not in resource.capabilities:
            return default
        value = resource.capabilities[self.key]
        self._check_value(value)
        found: V = value
        return found

    def _check_resource(self, resource: object) -> None:
        if not isinstance(resource, Resource):
            raise InvalidSpecError(
                f"CapabilityKey({self.key!r}).resource",
                type(resource).__name__,
                "is not a Resource",
                "pass a Role's resource, e.g. role.resource or specs.resource(h='...')",
            )
