"""How :class:`~anylaunch.specs.structured_opts.StructuredOpts` fields become run options.

Builds (once per class, cached on the class) the :class:`~anylaunch.specs.runopts.runopts`
schema of a StructuredOpts dataclass and the layout that rebuilds an instance from a flat cfg.
Internal to :mod:`anylaunch.specs.structured_opts`.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from anylaunch.specs.cases import camel_to_snake, snake_to_camel
from anylaunch.specs.errors import InvalidRunConfigException
from anylaunch.specs.runopts import CfgVal, get_type_name, runopts

_SCALARS: tuple[type, ...] = (str, int, float, bool)
_SUPPORTED = (
    "str, int, float, bool, list[str], dict[str, str], Optional[...] of any of these, "
    "or a nested StructuredOpts subclass (optionally Optional)"
)
# Per-class caches live on the class itself (looked up in cls.__dict__ so subclasses do not
# inherit a parent's), so they are collected together with the class.
_SCHEMA_ATTR = "_anylaunch_structured_opts_schema_"
_DOCS_ATTR = "_anylaunch_structured_opts_docs_"
# ranks of the other spellings of an option: its field name (when a cfg_key renames it),
# then the field name in camelCase; the option's own key (rank 0) beats both
_NAME_RANK, _CAMEL_RANK = 1, 2


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One option: the field it sets and its cfg key."""

    name: str
    key: str
    required: bool  # the field has no default


@dataclasses.dataclass(frozen=True)
class Layout:
    """How to rebuild one (possibly nested) instance from a flat, resolved cfg.

    ``sparse`` layouts belong to an optional group (a nested opts whose field defaults to
    None): their options are registered without defaults, and the instance is built from
    the options actually given, its own dataclass defaults filling the rest.
    """

    cls: type
    prefix: str
    sparse: bool
    leaves: tuple[Leaf, ...]
    children: tuple[Child, ...]


@dataclasses.dataclass(frozen=True)
class Child:
    """A nested opts field."""

    name: str
    layout: Layout
    optional: bool  # defaults to None: left None unless one of its options is given
    has_default: bool


@dataclasses.dataclass(frozen=True)
class Schema:
    opts: runopts
    paths: dict[str, tuple[str, ...]]  # cfg key -> attribute path from the root instance
    layout: Layout


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
        f"{owner.__qualname__}.{name} has unsupported type {get_type_name(annotation)}: "
        f"declare it as one of {_SUPPORTED}"
    )


def coerce(value: Any, opt_type: Any) -> Any:
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


def field_docs(cls: type) -> dict[str, str]:
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is not object and dataclasses.is_dataclass(klass):
            docs.update(_own_docs(klass))
    return docs


def check_dataclass(cls: type) -> None:
    import inspect

    fields = getattr(cls, "__dataclass_fields__", None)
    undeclared = set(inspect.get_annotations(cls)) - set(fields or ())
    if fields is None or undeclared:
        problem = f" (so {', '.join(sorted(undeclared))} are not options)" if undeclared else ""
        raise TypeError(
            f"{cls.__qualname__} is not a dataclass{problem}: decorate every StructuredOpts "
            "subclass with @dataclasses.dataclass"
        )


def type_hints(cls: type) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(cls)
    except Exception as e:  # a NameError/TypeError from evaluating a string annotation
        raise TypeError(
            f"cannot resolve the field annotations of {cls.__qualname__} ({e!r}): define the "
            "types its fields use at module level, where typing.get_type_hints can find them"
        ) from e


def option_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of ``cls`` that are options: init fields not starting with ``_`` (private
    fields and those computed in ``__post_init__`` are not)."""
    return [f for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]


def _nested_class(owner: type, name: str, annotation: Any, base: type) -> tuple[type | None, bool]:
    """The StructuredOpts class of a nested field and whether it is ``Optional``; (None, False)
    for a leaf option."""
    if isinstance(annotation, type) and issubclass(annotation, base):
        return annotation, False
    if get_origin(annotation) in (Union, types.UnionType):
        args = get_args(annotation)
        nested = [a for a in args if isinstance(a, type) and issubclass(a, base)]
        if nested:
            if len(args) != 2 or type(None) not in args:
                raise TypeError(
                    f"{owner.__qualname__}.{name}: a nested StructuredOpts can only be "
                    f"combined with None (Optional[{nested[0].__qualname__}]), not "
                    f"{get_type_name(annotation)}"
                )
            return nested[0], True
    return None, False


def _field_default(cls: type, f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        try:
            return f.default_factory()
        except Exception as e:
            raise TypeError(
                f"{cls.__qualname__}.{f.name}: default_factory raised {e!r}; fix the factory"
            ) from e
    return dataclasses.MISSING


def _cfg_key(cls: type, f: dataclasses.Field[Any]) -> str:
    key = f.metadata.get("cfg_key", f.name)
    if not isinstance(key, str) or not key.strip() or "." in key:
        raise TypeError(
            f"{cls.__qualname__}.{f.name}: metadata cfg_key={key!r} cannot name an option: "
            "use a non-empty string without '.', e.g. field(metadata={'cfg_key': 'mail-user'})"
        )
    return key


def _collect(
    cls: type,
    base: type,
    prefix: str,
    path: tuple[str, ...],
    instance_default: Any,
    sparse: bool,
    opts: runopts,
    paths: dict[str, tuple[str, ...]],
) -> Layout:
    """Adds the options of ``cls`` (keys prefixed with ``prefix``) and returns its layout.

    ``instance_default`` is the parent field's default of a nested opts: when set, every
    sub-option is optional and defaults to that instance's value. In a ``sparse`` layout
    every option is registered as optional without a default (see :class:`Layout`).
    """
    check_dataclass(cls)
    hints = type_hints(cls)
    docs = field_docs(cls)
    leaves: list[Leaf] = []
    children: list[Child] = []
    for f in option_fields(cls):
        annotation = hints[f.name]
        default = _field_default(cls, f)
        if instance_default is not None:
            default = getattr(instance_default, f.name)
        nested, is_optional = _nested_class(cls, f.name, annotation, base)
        if nested is not None:
            optional = is_optional and default is None
            layout = _collect(
                nested,
                base,
                f"{prefix}{f.name}.",
                (*path, f.name),
                default if isinstance(default, base) and not (sparse or optional) else None,
                sparse or optional,
                opts,
                paths,
            )
            children.append(Child(f.name, layout, optional, default is not dataclasses.MISSING))
            continue
        key = prefix + _cfg_key(cls, f)
        if key in paths:
            raise TypeError(
                f"{cls.__qualname__}.{f.name}: the option {key!r} is already declared by "
                f"another field: give one of them another cfg_key"
            )
        opt_type = _leaf_type(cls, f.name, annotation)
        required = default is dataclasses.MISSING
        help_text = (
            f.metadata.get("help") or docs.get(f.name) or f"{key} ({get_type_name(opt_type)})"
        )
        try:
            opts.add(
                key,
                type_=opt_type,
                help=str(help_text),
                default=None if required or sparse else coerce(default, opt_type),
                required=required and not sparse,
            )
        except (TypeError, ValueError) as e:
            raise TypeError(f"{cls.__qualname__}.{f.name}: {e}") from e
        opts._add_alias(prefix + f.name, key, _NAME_RANK)
        opts._add_alias(prefix + snake_to_camel(f.name), key, _CAMEL_RANK)
        leaves.append(Leaf(f.name, key, required))
        paths[key] = (*path, f.name)
    return Layout(cls, prefix, sparse, tuple(leaves), tuple(children))


def schema(cls: type, base: type) -> Schema:
    """The (cached) schema of the StructuredOpts dataclass ``cls``; ``base`` is StructuredOpts."""
    cached: Schema | None = cls.__dict__.get(_SCHEMA_ATTR)
    if cached is None:
        opts = runopts()
        paths: dict[str, tuple[str, ...]] = {}
        layout = _collect(cls, base, "", (), None, False, opts, paths)
        cached = Schema(opts, paths, layout)
        type.__setattr__(cls, _SCHEMA_ATTR, cached)
    return cached


def _given_in(layout: Layout, given: set[str]) -> bool:
    return any(leaf.key in given for leaf in layout.leaves) or any(
        _given_in(child.layout, given) for child in layout.children
    )


def build(layout: Layout, values: Mapping[str, CfgVal], given: set[str]) -> Any:
    """Rebuilds an instance from ``values`` (a resolved cfg); ``given`` holds the keys the
    user set to a value (not None), which decide whether optional groups are set."""
    kwargs: dict[str, Any] = {}
    for leaf in layout.leaves:
        if not layout.sparse or leaf.key in given:
            kwargs[leaf.name] = values[leaf.key]
        elif leaf.required:
            group = layout.prefix.rstrip(".")
            raise InvalidRunConfigException(
                leaf.key,
                None,
                f"required run option is missing (other {group}.* options are set)",
                f"pass {leaf.key} too, or none of the {group}.* options",
            )
    for child in layout.children:
        if child.layout.sparse and not _given_in(child.layout, given):
            if child.optional:
                kwargs[child.name] = None
                continue
            if child.has_default:
                continue  # the parent dataclass's default (or default_factory) applies
        kwargs[child.name] = build(child.layout, values, given)
    return layout.cls(**kwargs)


def walk(instance: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    """Follows ``path`` from ``instance``; (False, None) when it passes an unset optional group."""
    value = instance
    for name in path:
        if value is None:
            return False, None
        value = getattr(value, name)
    return True, value


def field_named(cls: type, part: str) -> str | None:
    """The init field of ``cls`` that ``part`` names: its name, cfg_key or camelCase."""
    candidates = option_fields(cls)
    ranked = [
        [f.name for f in candidates if f.name == part],
        [f.name for f in candidates if f.metadata.get("cfg_key") == part],
        [f.name for f in candidates if camel_to_snake(part) == f.name],
        [f.name for f in candidates if snake_to_camel(f.name) == part],
    ]
    return next((names[0] for names in ranked if names), None)


def docstrings(cls: type, base: type) -> dict[str, str]:
    """Attribute docstrings of the options of ``cls`` by field name, nested ones dotted."""
    check_dataclass(cls)
    hints = type_hints(cls)
    own = field_docs(cls)
    docs: dict[str, str] = {}
    for f in option_fields(cls):
        nested, _ = _nested_class(cls, f.name, hints[f.name], base)
        if nested is not None:
            docs.update({f"{f.name}.{k}": v for k, v in docstrings(nested, base).items()})
        elif f.name in own:
            docs[f.name] = own[f.name]
    return docs
