"""Typed scheduler run options declared as dataclass fields (:class:`StructuredOpts`).

A scheduler declares its options once, as a ``@dataclass`` subclass of :class:`StructuredOpts`;
the :class:`~anylaunch.specs.runopts.runopts` schema (types, defaults, required flags, help text)
is derived from the fields, and a raw ``cfg`` mapping is parsed back into a typed instance.

Help text comes from ``field(metadata={"help": ...})`` or from the field's attribute docstring
(the string literal right after it). Docstrings are read from the class source with :mod:`ast`,
which still works under ``python -OO`` (only ``__doc__`` is stripped, not the source) and for
modules imported from a zip (the zip loader serves the source). When there is no source at
all (pyc-only installs, classes typed into a REPL or a doctest) the help is generated from the
field's name and type.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

from anylaunch.specs.errors import InvalidRunConfigException
from anylaunch.specs.runopts import CfgVal, camel_to_snake, runopt, runopts

__all__ = ["StructuredOpts"]

_T = TypeVar("_T", bound="StructuredOpts")

_SCALARS: tuple[type, ...] = (str, int, float, bool)
_SUPPORTED = (
    "str, int, float, bool, list[str], dict[str, str], Optional[...] of any of these, "
    "or a nested StructuredOpts subclass"
)
# Per-class caches live on the class itself (looked up in cls.__dict__ so subclasses do not
# inherit a parent's), so they are collected together with the class.
_SCHEMA_ATTR = "_anylaunch_structured_opts_schema_"
_DOCS_ATTR = "_anylaunch_structured_opts_docs_"


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) and not get_args(tp) else str(tp)


@dataclasses.dataclass(frozen=True)
class _Layout:
    """How to rebuild one (possibly nested) instance from a flat, resolved cfg."""

    cls: type[StructuredOpts]
    leaves: tuple[tuple[str, str], ...]  # (field name, cfg key)
    children: tuple[tuple[str, _Layout], ...]  # (field name, layout of the nested opts)


@dataclasses.dataclass(frozen=True)
class _Schema:
    opts: runopts
    paths: dict[str, tuple[str, ...]]  # cfg key -> attribute path from the root instance
    layout: _Layout


def _leaf_type(owner: type, name: str, annotation: Any) -> Any:
    """Normalizes a field annotation to a runopt type; ``Optional[X]`` becomes ``X``."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        args = get_args(annotation)
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1 and len(args) == 2:
            annotation, origin = non_none[0], get_origin(non_none[0])
    if annotation in _SCALARS:
        return annotation
    if origin is list and get_args(annotation) == (str,):
        return list[str]
    if origin is dict and get_args(annotation) == (str, str):
        return dict[str, str]
    raise TypeError(
        f"{owner.__qualname__}.{name} has unsupported type {_type_name(annotation)}: "
        f"declare it as one of {_SUPPORTED}"
    )


def _coerce(value: Any, opt_type: Any) -> Any:
    """Gives an instance its own copy of containers, and ints in float fields as floats."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if opt_type is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _own_docs(klass: type) -> dict[str, str]:
    """Attribute docstrings of the fields declared in ``klass``'s own body (cached)."""
    cached: dict[str, str] | None = klass.__dict__.get(_DOCS_ATTR)
    if cached is not None:
        return cached
    import ast
    import inspect

    own = set(inspect.get_annotations(klass))
    docs: dict[str, str] = {}
    try:
        source = inspect.getsource(klass)
        # A class defined inside a function is indented; nesting it under `if 1:` parses it
        # without dedenting (which breaks on docstrings with less-indented lines).
        tree = ast.parse("if 1:\n" + source if source[:1].isspace() else source)
    except Exception:  # no source (pyc-only, REPL, doctest) or unparsable: generated help
        tree = None
    node = None
    if tree is not None:
        node = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == klass.__name__),
            None,
        )
    if node is not None:
        annotated: set[str] = set()
        for stmt, nxt in zip(node.body, [*node.body[1:], None], strict=True):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            annotated.add(stmt.target.id)
            if (
                isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[stmt.target.id] = inspect.cleandoc(nxt.value.value)
        if annotated != own:
            # The source found is not this class (a stale file, or another class of the same
            # name): its docstrings would be wrong, so use none.
            docs = {}
    type.__setattr__(klass, _DOCS_ATTR, docs)
    return docs


def _field_docs(cls: type) -> dict[str, str]:
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is not object and dataclasses.is_dataclass(klass):
            docs.update(_own_docs(klass))
    return docs


def _check_dataclass(cls: type) -> None:
    import inspect

    fields = getattr(cls, "__dataclass_fields__", None)
    undeclared = set(inspect.get_annotations(cls)) - set(fields or ())
    if fields is None or undeclared:
        problem = f" (so {', '.join(sorted(undeclared))} are not options)" if undeclared else ""
        raise TypeError(
            f"{cls.__qualname__} is not a dataclass{problem}: decorate every StructuredOpts "
            "subclass with @dataclasses.dataclass"
        )


def _type_hints(cls: type) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception as e:  # a NameError/TypeError from evaluating a string annotation
        raise TypeError(
            f"cannot resolve the field annotations of {cls.__qualname__} ({e!r}): define the "
            "types its fields use at module level, where typing.get_type_hints can find them"
        ) from e


def _collect(
    cls: type[StructuredOpts],
    prefix: str,
    path: tuple[str, ...],
    instance_default: StructuredOpts | None,
    opts: runopts,
    paths: dict[str, tuple[str, ...]],
) -> _Layout:
    """Adds the options of ``cls`` (keys prefixed with ``prefix``) and returns its layout.

    ``instance_default`` is the parent field's default of a nested opts: when set, every
    sub-option is optional and defaults to that instance's value.
    """
    _check_dataclass(cls)
    hints = _type_hints(cls)
    docs = _field_docs(cls)
    leaves: list[tuple[str, str]] = []
    children: list[tuple[str, _Layout]] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not f.init:  # computed in __post_init__, not an option
            continue
        key, annotation = prefix + f.name, hints[f.name]
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            try:
                default = f.default_factory()
            except Exception as e:
                raise TypeError(
                    f"{cls.__qualname__}.{f.name}: default_factory raised {e!r}; fix the factory"
                ) from e
        else:
            default = dataclasses.MISSING
        if instance_default is not None:
            default = getattr(instance_default, f.name)
        if isinstance(annotation, type) and issubclass(annotation, StructuredOpts):
            nested = default if isinstance(default, StructuredOpts) else None
            layout = _collect(annotation, key + ".", (*path, f.name), nested, opts, paths)
            children.append((f.name, layout))
            continue
        if get_origin(annotation) in (Union, types.UnionType) and any(
            isinstance(a, type) and issubclass(a, StructuredOpts) for a in get_args(annotation)
        ):
            raise TypeError(
                f"{cls.__qualname__}.{f.name}: an Optional nested StructuredOpts is not "
                "supported: declare the plain class and give it a default_factory"
            )
        opt_type = _leaf_type(cls, f.name, annotation)
        required = default is dataclasses.MISSING
        help_text = f.metadata.get("help") or docs.get(f.name) or f"{key} ({_type_name(opt_type)})"
        try:
            opts.add(
                key,
                type_=opt_type,
                help=str(help_text),
                default=None if required else _coerce(default, opt_type),
                required=required,
            )
        except (TypeError, ValueError) as e:
            raise TypeError(f"{cls.__qualname__}.{f.name}: {e}") from e
        leaves.append((f.name, key))
        paths[key] = (*path, f.name)
    return _Layout(cls, tuple(leaves), tuple(children))


def _schema(cls: type[StructuredOpts]) -> _Schema:
    cached: _Schema | None = cls.__dict__.get(_SCHEMA_ATTR)
    if cached is None:
        opts = runopts()
        paths: dict[str, tuple[str, ...]] = {}
        layout = _collect(cls, "", (), None, opts, paths)
        cached = _Schema(opts, paths, layout)
        type.__setattr__(cls, _SCHEMA_ATTR, cached)
    return cached


def _build(layout: _Layout, values: Mapping[str, CfgVal]) -> Any:
    kwargs: dict[str, Any] = {name: values[key] for name, key in layout.leaves}
    for name, child in layout.children:
        kwargs[name] = _build(child, values)
    return layout.cls(**kwargs)


class StructuredOpts:
    """Base class for typed scheduler configuration options.

    Subclasses are ``@dataclass``-decorated; each field is a run option of type ``str``,
    ``int``, ``float``, ``bool``, ``list[str]``, ``dict[str, str]`` (optionally ``Optional``),
    or a nested ``StructuredOpts`` whose options get dot-prefixed keys (``k8s.context``).
    A field without a default is required. Help text comes from ``field(metadata={"help":
    ...})`` or from the string literal right after the field.

    >>> from dataclasses import dataclass
    >>> from anylaunch.specs.structured_opts import StructuredOpts
    >>>
    >>> @dataclass
    ... class MyOpts(StructuredOpts):
    ...     cluster_name: str
    ...     '''Name of the cluster to submit to.'''
    ...
    ...     num_retries: int = 3
    ...     '''Number of retry attempts.'''
    ...
    >>> # Use in scheduler:
    >>> # def _run_opts(self) -> runopts:
    >>> #     return MyOpts.as_runopts()
    >>> #
    >>> # def _submit_dryrun(self, app, cfg):
    >>> #     opts = MyOpts.from_cfg(cfg)
    >>> #     # opts.cluster_name, opts.num_retries are typed
    >>> opts = MyOpts.from_cfg({"clusterName": "prod", "num_retries": "5"})
    >>> opts
    MyOpts(cluster_name='prod', num_retries=5)
    >>> opts.get("clusterName"), opts.to_cfg()
    ('prod', {'cluster_name': 'prod', 'num_retries': 5})
    >>> [(name, opt.is_required, opt.default) for name, opt in MyOpts.as_runopts()]
    [('cluster_name', True, None), ('num_retries', False, 3)]
    """

    @classmethod
    def as_runopts(cls) -> runopts:
        """Build runopts from dataclass fields.

        Nested StructuredOpts fields are flattened with dot-prefixed keys (e.g., field
        ``k8s: K8sOpts`` with sub-field ``context`` becomes ``k8s.context``).

        Raises:
            TypeError: the class is not a dataclass, or a field has an unsupported type.
        """
        opts = runopts()
        opts.update(_schema(cls).opts)  # a copy: callers may add options to it
        return opts

    @classmethod
    def from_cfg(cls: type[_T], cfg: Mapping[str, CfgVal]) -> _T:
        """Create an instance from a raw config dict.

        Keys are the snake_case field names or their camelCase aliases (``hpcIdentity`` sets
        ``hpc_identity``); nested fields use dot-prefixed keys (``k8s.context``). Missing
        optional keys take their defaults. Strings given for non-str options (from config
        files and the CLI) are cast to the option's type.

        Raises:
            InvalidRunConfigException: an unknown key, a missing required option, or a value
                of the wrong type (or a string that does not cast to it).
        """
        if not isinstance(cfg, Mapping):
            raise InvalidRunConfigException(
                "cfg", cfg, "not a mapping", "pass a dict of option name to value"
            )
        schema = _schema(cls)
        typed: dict[str, CfgVal] = {}
        for key, value in cfg.items():
            if not isinstance(key, str):
                raise InvalidRunConfigException(
                    "cfg", key, "option names must be strings", f"use one of {sorted(schema.paths)}"
                )
            opt: runopt | None = schema.opts.get(key)
            if opt is not None and isinstance(value, str) and opt.opt_type is not str:
                try:
                    value = opt.cast_to_type(value)
                except (TypeError, ValueError) as e:
                    raise InvalidRunConfigException(
                        key,
                        value,
                        f"cannot be read as {_type_name(opt.opt_type)} ({e})",
                        f"pass a value of type {_type_name(opt.opt_type)}",
                    ) from None
            typed[key] = value
        resolved = schema.opts.resolve(typed)
        coerced = {}
        for key, value in resolved.items():
            opt = schema.opts.get(key)
            coerced[key] = _coerce(value, opt.opt_type if opt is not None else None)
        instance: _T = _build(schema.layout, coerced)
        return instance

    def to_cfg(self) -> dict[str, CfgVal]:
        """Returns the flat cfg (dotted keys for nested options) that :meth:`from_cfg` reads back.

        ``None`` means "unset" in a cfg, so an ``Optional`` field holding None round-trips to
        its default.
        """
        cfg: dict[str, CfgVal] = {}
        for key, path in _schema(type(self)).paths.items():
            value: Any = self
            for name in path:
                value = getattr(value, name, None)
            cfg[key] = _coerce(value, None)
        return cfg

    def get(self, k: str, d: Any = None) -> Any:
        """D[k] if k in D, else d. d defaults to None.

        ``k`` is a field name, its camelCase alias, or a dotted key of a nested option.
        """
        for key in (k, camel_to_snake(k)):
            value: Any = self
            for name in key.split("."):
                if name not in getattr(value, "__dataclass_fields__", ()):
                    break
                value = getattr(value, name)
            else:
                return value
        return d
