"""Well-known ``Resource.tags`` keys that named-resource registration sets.

Plain data, read by :class:`~anylaunch.specs.Resource` and set by every named-resource factory
(:func:`anylaunch.specs.resources.named_resource` and ``@anylaunch.plugins.register``); also
exported as ``anylaunch.plugins.resource_tags``.
"""

__all__ = ["resource_tags"]


class resource_tags:
    """Well-known ``Resource.tags`` keys set by :class:`~anylaunch.plugins.register`.

    Every resource made by a factory registered with ``@register.named_resource`` (and by
    :func:`anylaunch.specs.resources.named_resource`) carries its registered name and whether
    it is a fractional slice. Read them with ``Resource.get_resource_name()`` and
    ``Resource.is_fractional()`` rather than through these keys.

    >>> from anylaunch.specs import resource
    >>> r = resource(h="gpu.small")
    >>> r.tags[resource_tags.RESOURCE_NAME], r.get_resource_name()
    ('gpu.small', 'gpu.small')
    >>> r.is_fractional()
    False
    """

    #: The registered name that produced the resource.
    RESOURCE_NAME: str = "anylaunch/resource_name"

    #: ``True`` when the resource is a fractional slice of a base resource.
    IS_FRACTIONAL: str = "anylaunch/fractional"
