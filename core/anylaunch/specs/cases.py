"""Case conversion of run option names (TorchX's ``torchx.specs.cases``).

Run options are declared in snake_case; users may spell them in camelCase (``clusterName``),
so both directions are needed to match a key to its option.

>>> from anylaunch.specs import cases
>>> cases.snake_to_camel("cluster_name"), cases.camel_to_snake("clusterName")
('clusterName', 'cluster_name')
"""

from __future__ import annotations

import re

__all__ = ["camel_to_snake", "snake_to_camel"]

# a lower-case letter or digit followed by an upper-case letter is a word boundary
_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")


def snake_to_camel(name: str) -> str:
    """Converts snake_case to camelCase: the first word is kept, the others are title-cased.

    >>> snake_to_camel("hpc_cluster_uuid")
    'hpcClusterUuid'
    >>> snake_to_camel("name")
    'name'
    """
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)


def camel_to_snake(name: str) -> str:
    """Converts camelCase to snake_case; snake_case names come back unchanged.

    >>> camel_to_snake("clusterName"), camel_to_snake("clusterID"), camel_to_snake("k8sContext")
    ('cluster_name', 'cluster_id', 'k8s_context')
    >>> camel_to_snake("already_snake")
    'already_snake'
    """
    return _BOUNDARY.sub(r"\1_\2", name).lower()
