"""Typed scheduler run options declared as dataclass fields (:class:`StructuredOpts`).

A scheduler declares its options once, as a ``@dataclass`` subclass of :class:`StructuredOpts`;
the :class:`~anylaunch.specs.runopts.runopts` schema (types, defaults, required flags, help text)
is derived from the fields, and a raw ``cfg`` mapping is parsed back into a typed instance.
An instance is also a read-only mapping of option name to value (TorchX's compatibility
contract for code that reads ``cfg["key"]`` or ``cfg.get("key")``).

Help text comes from ``field(metadata={"help": ...})`` or from the field's attribute docstring
(the string literal right after it). Docstrings are read from the class source with :mod:`ast`,
which still works under ``python -OO`` (only ``__doc__`` is stripped, not the source) and for
modules imported from a zip (the zip loader serves the source). When there is no source at
all (pyc-only installs, classes typed into a REPL or a doctest) the help is generated from the
field's name and type.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from anylaunch.specs import structured_opts_schema as _s
from anylaunch.specs.errors import InvalidRunConfigException
from anylaunch.specs.runopts import CfgVal, get_type_name, runopt, runopts

__all__ = ["StructuredOpts"]

_T = TypeVar("_T", bound="StructuredOpts")


class StructuredOpts(Mapping[str, CfgVal]):
    """Base class for typed scheduler configuration options.

    Subclasses are ``@dataclass``-decorated; each field is a run option of type ``str``,
    ``int``, ``float``, ``bool``, ``list[str]``, ``dict[str, str]`` (optionally ``Optional``),
    or a nested ``StructuredOpts`` whose options get dot-prefixed keys (``k8s.context``). A
    nested field declared ``Optional[...] = None`` is an optional group: it stays None unless
    one of its options is given. A field without a default is required. Help text comes from
    ``field(metadata={"help": ...})`` or from the string literal right after the field.
    ``field(metadata={"cfg_key": "mail-user"})`` names an option that cannot be a field name;
    the field name and its camelCase still work as aliases. Fields whose name starts with
    ``_`` (they need a default) and ``init=False`` fields are not options.

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
    >>> opts["clusterName"], opts.get("num_retries"), list(opts), len(opts), "clusterName" in opts
    ('prod', 5, ['cluster_name', 'num_retries'], 2, True)
    >>> opts.to_cfg()
    {'cluster_name': 'prod', 'num_retries': 5}
    >>> [(name, opt.is_required, opt.default) for name, opt in MyOpts.as_runopts()]
    [('cluster_name', True, None), ('num_retries', False, 3)]
    """

    @classmethod
    def as_runopts(cls) -> runopts:
        """Build runopts from dataclass fields.

        Nested StructuredOpts fields are flattened with dot-prefixed keys (e.g., field
        ``k8s: K8sOpts`` with sub-field ``context`` becomes ``k8s.context``). The options of
        an optional group (``k8s: Optional[K8sOpts] = None``) are registered without defaults:
        the group's own defaults apply once one of its options is given.

        Raises:
            TypeError: the class is not a dataclass, or a field has an unsupported type.
        """
        opts = runopts()
        opts.update(_s.schema(cls, StructuredOpts).opts)  # a copy: callers may add options to it
        return opts

    @classmethod
    def get_docstrings(cls) -> dict[str, str]:
        """Attribute docstrings of the fields by field name; nested ones as ``k8s.context``.

        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class Opts(StructuredOpts):
        ...     queue: str = "q"
        ...     '''Queue of the job.'''
        >>> Opts.get_docstrings()  # a class typed at a prompt has no source to read them from
        {}
        """
        return _s.docstrings(cls, StructuredOpts)

    @classmethod
    def from_cfg(cls: type[_T], cfg: Mapping[str, CfgVal]) -> _T:
        """Create an instance from a raw config dict.

        Keys are the snake_case field names, their camelCase aliases (``hpcIdentity`` sets
        ``hpc_identity``) or the field's ``cfg_key``; nested fields use dot-prefixed keys
        (``k8s.context``). When one option is given under two spellings, the cfg key wins over
        the field name and both over the camelCase alias, whatever their order. Missing
        optional keys take their defaults; an optional group none of whose options is given
        (a value of None counts as not given) stays None. Strings given for non-str options
        (from config files and the CLI) are cast to the option's type.

        Raises:
            InvalidRunConfigException: an unknown key, a missing required option, or a value
                of the wrong type (or a string that does not cast to it).
        """
        if not isinstance(cfg, Mapping):
            raise InvalidRunConfigException(
                "cfg", cfg, "not a mapping", "pass a dict of option name to value"
            )
        schema = _s.schema(cls, StructuredOpts)
        typed: dict[str, CfgVal] = {}
        for key, (_, value) in schema.opts._by_option(cfg).items():
            opt: runopt = schema.opts._opts[key]
            if isinstance(value, str) and opt.opt_type is not str:
                try:
                    value = opt.cast_to_type(value)
                except (TypeError, ValueError) as e:
                    raise InvalidRunConfigException(
                        key,
                        value,
                        f"cannot be read as {get_type_name(opt.opt_type)} ({e})",
                        f"pass a value of type {get_type_name(opt.opt_type)}",
                    ) from None
            typed[key] = value
        given = {key for key, value in typed.items() if value is not None}
        resolved = schema.opts.resolve(typed)
        coerced = {
            key: _s.coerce(value, schema.opts._opts[key].opt_type)
            for key, value in resolved.items()
        }
        instance: _T = _s.build(schema.layout, coerced, given)
        return instance

    def to_cfg(self) -> dict[str, CfgVal]:
        """Returns the flat cfg (dotted keys for nested options) that :meth:`from_cfg` reads back.

        ``None`` means "unset" in a cfg, so an ``Optional`` field holding None round-trips to
        its default; the options of an optional group that is None are left out.
        """
        return {key: _s.coerce(self[key], None) for key in self}

    # --- the read-only mapping (TorchX's backward-compatibility contract) ---------------------

    def __getitem__(self, key: str) -> CfgVal:
        """The value of option ``key``: its cfg key, field name or camelCase, dotted for
        nested options (``k8s.context``); a nested field's name gives the nested opts.

        Raises:
            KeyError: no such option, or an option of an optional group that is None.
        """
        if not isinstance(key, str):
            raise KeyError(key)
        schema = _s.schema(type(self), StructuredOpts)
        canonical = schema.opts._canonical(key)
        if canonical is not None and canonical in schema.paths:
            found, value = _s.walk(self, schema.paths[canonical])
            if found:
                return value  # type: ignore[no-any-return]
            raise KeyError(key)
        value = self
        for part in key.split("."):  # a nested group by field name: "k8s", "middle.leaf"
            name = _s.field_named(type(value), part) if isinstance(value, StructuredOpts) else None
            if name is None:
                raise KeyError(key)
            value = getattr(value, name)
        return value  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        """The option keys (cfg keys, nested ones dotted), skipping optional groups left None."""
        for key, path in _s.schema(type(self), StructuredOpts).paths.items():
            if _s.walk(self, path)[0]:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def get(self, k: str, d: Any = None) -> Any:
        """D[k] if k in D, else d. d defaults to None.

        ``k`` is a cfg key, field name, its camelCase alias, or a dotted key of a nested option.
        """
        try:
            return self[k]
        except KeyError:
            return d

    def __or__(self, other: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        """Merges two opts (or opts and a mapping) into one flat cfg; the right side wins.

        >>> from dataclasses import dataclass
        >>> @dataclass
        ... class OptsA(StructuredOpts):
        ...     foo: str = "a"
        ...     bar: int = 0
        >>> @dataclass
        ... class OptsB(StructuredOpts):
        ...     bar: int = 1
        >>> OptsA(foo="x") | OptsB(bar=2)
        {'foo': 'x', 'bar': 2}
        >>> {"foo": "y", "baz": 3} | OptsA()
        {'foo': 'a', 'baz': 3, 'bar': 0}
        """
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**self.to_cfg(), **{k: _s.coerce(other[k], None) for k in other}}

    def __ror__(self, other: Mapping[str, CfgVal]) -> dict[str, CfgVal]:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**{k: _s.coerce(other[k], None) for k in other}, **self.to_cfg()}
