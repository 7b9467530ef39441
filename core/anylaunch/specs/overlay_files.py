"""File-backed overlay namespaces: ``metadata[namespace]`` names a JSON or YAML file.

Import the overlay API from :mod:`anylaunch.specs.overlays`; this module only loads files.
"""

from __future__ import annotations

from typing import Any

from anylaunch.specs.overlay_keys import InvalidOverlayError

__all__ = ["load_namespace"]


def load_namespace(namespace: str, path: str) -> dict[str, Any]:
    """Loads a file-backed namespace (a local path or an fsspec URI) as a dict.

    JSON, or YAML for ``.yaml``/``.yml`` files and for text that is not JSON. YAML may use
    ``!!python/tuple`` (a tuple replaces a list: the legacy spelling of PUT).

    Raises:
        InvalidOverlayError: (a ValueError) if the file cannot be read or parsed, or does not
            hold a mapping.
    """
    try:
        import fsspec

        with fsspec.open(path, "rt", encoding="utf-8") as f:
            text = f.read()
        if path.lower().endswith((".yaml", ".yml")):
            data = load_yaml(text)
        else:
            import json

            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                data = load_yaml(text)
    except Exception as e:
        raise InvalidOverlayError(
            f"metadata[{namespace!r}]",
            path,
            f"could not load the overlay file ({type(e).__name__}: {e})",
            "point it at a readable JSON or YAML file (a local path or an fsspec URI such as "
            "file:///abs/overlays.yaml) holding a mapping of kind -> overlay",
        ) from e
    if data is None:  # an empty file
        return {}
    if not isinstance(data, dict):
        raise InvalidOverlayError(
            f"metadata[{namespace!r}]",
            path,
            f"the file holds a {type(data).__name__}, not a mapping",
            "write a mapping of kind -> overlay, e.g. {'V1Pod': {'spec': {...}}}",
        )
    return data


def load_yaml(text: str) -> Any:
    """Safe YAML, plus ``!!python/tuple`` (read as a tuple: it replaces a list).

    >>> load_yaml("args: !!python/tuple [a, b]")
    {'args': ('a', 'b')}
    """
    import yaml

    class _TupleSafeLoader(yaml.SafeLoader):
        pass

    def _tuple(loader: yaml.SafeLoader, node: yaml.Node) -> tuple[Any, ...]:
        assert isinstance(node, yaml.SequenceNode)
        return tuple(loader.construct_sequence(node, deep=True))

    _TupleSafeLoader.add_constructor("tag:yaml.org,2002:python/tuple", _tuple)
    return yaml.load(text, Loader=_TupleSafeLoader)  # a SafeLoader subclass
