"""The ``.anylaunchconfig`` file: per-project and per-user defaults in INI format.

Sections:

- ``[SCHEDULER]`` (e.g. ``[local_cwd]``): that scheduler's run options (``cfg``). Values are
  written as on the command line and cast with the scheduler's runopts (``True``/``False``,
  ``a;b;c`` for lists, ``k:v,k2:v2`` for dicts). An empty value or ``None`` means "unset here".
  A key that is no run option of the scheduler is skipped with a warning, unless it looks
  like a misspelt one (``log_dri``): that is an error, since the run would silently use the
  default instead.
- ``[component:NAME]``: default arguments of component ``NAME``, as typed on the command line.
- ``[cli:run]``: defaults for ``anylaunch run`` (e.g. ``scheduler``, ``component``).

Which files are read, highest precedence first (a key comes from the first file that has it):

1. ``$ANYLAUNCHCONFIG``, if set: that file only, even when ``dirs`` are given. A missing file
   is an error (FileNotFoundError); an empty value reads no file at all (so does
   ``/dev/null``).
2. else ``{dir}/.anylaunchconfig`` for each of the ``dirs`` given to a function, in order.
3. else (no or empty ``dirs``) ``$HOME/.anylaunchconfig`` (the user's, which overlays the
   project's), then ``./.anylaunchconfig`` (the current directory's): the directories of
   :data:`DEFAULT_CONFIG_DIRS`, which can be replaced (as in TorchX).

The schedulers whose run options cast a section's values are looked up with this module's
``get_scheduler_factories`` (TorchX's name): patching it changes what is read and dumped.

Run options passed explicitly (``cfg``) always win over every file, and the scheduler's
defaults apply to what no file sets. Example::

    # ./.anylaunchconfig
    [local_cwd]
    log_dir = /tmp/logs

    [component:utils.echo]
    msg = hello

    [cli:run]
    scheduler = local_cwd
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, MutableMapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from anylaunch.schedulers import get_scheduler_factories
from anylaunch.settings import ENV_ANYLAUNCHCONFIG
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError, did_you_mean
from anylaunch.specs.runopts import CfgVal, camel_to_snake, runopt, runopts

if TYPE_CHECKING:
    import configparser

    from anylaunch.schedulers.api import Scheduler

__all__ = [
    "CONFIG_FILE",
    "CONFIG_PREFIX_DELIM",
    "DEFAULT_CONFIG_DIRS",
    "ENV_ANYLAUNCHCONFIG",
    "ConfigFileNotFoundError",
    "InvalidConfigFileError",
    "apply",
    "dump",
    "find_configs",
    "get_config",
    "get_configs",
    "get_scheduler_factories",
    "load",
    "load_sections",
]

#: Name of the config file looked up in each directory.
CONFIG_FILE = ".anylaunchconfig"
#: Separates a section's prefix from its name: ``[component:dist.ddp]``.
CONFIG_PREFIX_DELIM = ":"
#: The section of anylaunch's own settings (not a scheduler's).
GLOBAL_SECTION = "anylaunch"
#: Placeholder that ``dump`` writes for required options; loading it is an error.
FIXME = "FIXME"


def _home_and_cwd() -> list[str]:
    try:
        home = str(Path.home())
    except RuntimeError:  # no $HOME and no passwd entry: only the current directory
        return [str(Path.cwd())]
    return [home, str(Path.cwd())]


#: The directories searched when a function is given no ``dirs`` (and ``$ANYLAUNCHCONFIG``
#: is unset): ``$HOME`` then the current directory, as TorchX's name says. Replace or edit
#: it to search elsewhere (tests do). Left as it is, ``$HOME`` and the current directory are
#: looked up again on every call, so a later ``chdir`` is honoured.
DEFAULT_CONFIG_DIRS: list[str] = _home_and_cwd()
# what DEFAULT_CONFIG_DIRS held at import: while it still holds that, it means "look up now"
_DEFAULT_CONFIG_DIRS_AT_IMPORT: tuple[list[str], tuple[str, ...]] = (
    DEFAULT_CONFIG_DIRS,
    tuple(DEFAULT_CONFIG_DIRS),
)

_UNSET = frozenset({"", "None"})
# configparser's DEFAULT section leaks its keys into every section: treat it as a normal one
_NO_DEFAULT_SECTION = "\x00anylaunch-no-default-section"

log: logging.Logger = logging.getLogger(__name__)


class InvalidConfigFileError(InvalidSpecError):
    """A config file cannot be parsed, or one of its entries cannot work.

    >>> err = InvalidConfigFileError("/p/.anylaunchconfig", "local_cwd", "log_dri", "/x",
    ...                              "unknown run option", "remove it")
    >>> str(err)
    "/p/.anylaunchconfig[local_cwd].log_dri='/x' is invalid: unknown run option. Fix: remove it"
    """

    def __init__(
        self, path: str, section: str | None, key: str | None, value: Any, problem: str, fix: str
    ) -> None:
        self.path = path
        self.section = section
        self.key = key
        where = path
        if section is not None:
            where += f"[{section}]"
        if key is not None:
            where += f".{key}"
        super().__init__(where, value, problem, fix)


class ConfigFileNotFoundError(InvalidConfigFileError, FileNotFoundError):
    """``$ANYLAUNCHCONFIG`` names a file that does not exist (or is a directory).

    It is a FileNotFoundError, as in TorchX, and an anylaunch input error.

    >>> err = ConfigFileNotFoundError("/no/such.ini")
    >>> isinstance(err, FileNotFoundError), err.path
    (True, '/no/such.ini')
    """

    def __init__(self, path: str) -> None:
        super().__init__(
            path,
            None,
            None,
            path,
            f"${ENV_ANYLAUNCHCONFIG} names a file that does not exist",
            f"point {ENV_ANYLAUNCHCONFIG} at a config file, set it empty to read no file, "
            "or unset it to read $HOME/.anylaunchconfig and ./.anylaunchconfig",
        )


def _configparser() -> configparser.ConfigParser:
    import configparser

    parser = configparser.ConfigParser(
        interpolation=None,  # a '%' in a value (e.g. a URL) is literal
        default_section=_NO_DEFAULT_SECTION,
    )
    # keep option names as written: run options are case-sensitive (camelCase is accepted)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    return parser


def _read(f: TextIO, path: str) -> configparser.ConfigParser:
    import configparser

    parser = _configparser()
    try:
        parser.read_file(f, source=path)
    except configparser.Error as e:
        first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InvalidConfigFileError(
            path,
            None,
            None,
            type(e).__name__,
            f"not a valid INI file ({first_line})",
            "write [section] headers followed by `key = value` lines, each key once per section",
        ) from None
    return parser


def _read_path(path: str) -> configparser.ConfigParser:
    with open(path, encoding="utf-8") as f:
        return _read(f, path)


def find_configs(dirs: Iterable[str] | None = None) -> list[str]:
    """Returns the config files to read, highest precedence first.

    ``$ANYLAUNCHCONFIG``, when set, names the only file (even if ``dirs`` are given; an empty
    value: no file). Otherwise each ``{dir}/.anylaunchconfig`` of ``dirs`` that exists, in
    order; with no or empty ``dirs``: ``$HOME/.anylaunchconfig`` then ``./.anylaunchconfig``.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, ".anylaunchconfig"), "w").write("[local_cwd]\\n")
    >>> saved = os.environ.pop("ANYLAUNCHCONFIG", None)
    >>> find_configs(dirs=[d, "/no/such/dir"]) == [os.path.join(d, ".anylaunchconfig")]
    True
    >>> os.environ["ANYLAUNCHCONFIG"] = ""  # set: it wins over dirs; empty: no file
    >>> find_configs(dirs=[d])
    []
    >>> if saved is None: del os.environ["ANYLAUNCHCONFIG"]
    ... else: os.environ["ANYLAUNCHCONFIG"] = saved

    Raises:
        FileNotFoundError: ``$ANYLAUNCHCONFIG`` names a path that is not a file
            (a :class:`ConfigFileNotFoundError`).
    """
    if dirs is not None and isinstance(dirs, str):
        raise InvalidSpecError(
            "dirs", dirs, "must be a list of directories, not a str", f"pass dirs=[{dirs!r}]"
        )
    env_file = os.environ.get(ENV_ANYLAUNCHCONFIG)
    if env_file is not None:
        if not env_file:
            return []  # set but empty: read no file at all
        if not os.path.exists(env_file) or os.path.isdir(env_file):
            raise ConfigFileNotFoundError(env_file)
        return [env_file]
    dir_list = list(dirs) if dirs is not None else []
    if not dir_list:
        dir_list = _default_dirs()
    found: list[str] = []
    seen: set[str] = set()
    for d in dir_list:
        path = os.path.join(os.path.expanduser(d), CONFIG_FILE)
        if not os.path.isfile(path):  # first: realpath costs a syscall per path component
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        if not os.access(path, os.R_OK):
            log.warning("%s is not readable and is skipped", path)
            continue
        found.append(path)
    return found


def _default_dirs() -> list[str]:
    """:data:`DEFAULT_CONFIG_DIRS` as the module holds it now (a user may have replaced or
    edited it); untouched, ``$HOME`` and the current directory as they are now."""
    current = DEFAULT_CONFIG_DIRS
    original, snapshot = _DEFAULT_CONFIG_DIRS_AT_IMPORT
    if current is original and tuple(current) == snapshot:
        return _home_and_cwd()
    if isinstance(current, (str, bytes)) or not isinstance(current, Iterable):
        raise InvalidSpecError(
            "anylaunch.runner.config.DEFAULT_CONFIG_DIRS",
            current,
            "must be a list of directories",
            f"set it to [{current!r}]" if isinstance(current, str) else "set it to a list",
        )
    return [str(d) for d in current]


def _canonical_keys(cfg: Iterable[str], opts: runopts) -> set[str]:
    names = {name for name, _ in opts}
    return {key if key in names else camel_to_snake(key) for key in cfg}


def _get_scheduler(name: str) -> Scheduler[Any]:
    """A scheduler instance (session ``"_"``) made by the factory that this module's
    :func:`get_scheduler_factories` (TorchX's lookup; patch it to change what is read)
    registers under ``name``. Close it after use.

    Raises:
        UnknownSchedulerException: no factory has that name (with a did-you-mean)
    """
    from anylaunch.specs.errors import UnknownSchedulerException

    factories = get_scheduler_factories()
    if not isinstance(name, str) or name not in factories:
        raise UnknownSchedulerException(str(name), factories)
    return factories[name]("_")


def _scheduler_run_opts(scheduler: str) -> runopts:
    sched = _get_scheduler(scheduler)
    try:
        return sched.run_opts()
    finally:
        sched.close()


def _is_placeholder(value: str) -> bool:
    """``FIXME`` (ours) or ``#FIXME:(type) help`` (a template written by TorchX)."""
    text = value.strip().lstrip("#").strip()
    return text == FIXME or text.startswith((f"{FIXME}:", f"{FIXME} "))


def _cast(path: str, scheduler: str, name: str, value: str, opt: runopt) -> CfgVal:
    if value.strip() in _UNSET:
        return None
    if _is_placeholder(value):
        raise InvalidConfigFileError(
            path,
            scheduler,
            name,
            value,
            f"is still the {FIXME} placeholder written by `anylaunch configure` ({opt.help})",
            "replace it with a real value, or pass the option explicitly with -cfg",
        )
    try:
        return opt.cast_to_type(value)
    except (TypeError, ValueError) as e:
        raise InvalidConfigFileError(
            path, scheduler, name, value, str(e), "write the value as on the command line"
        ) from None


def load(
    scheduler: str,
    f: TextIO,
    cfg: MutableMapping[str, CfgVal],
    *,
    opts: runopts | None = None,
) -> None:
    """Adds the ``[scheduler]`` section of the INI file ``f`` to ``cfg`` without overriding
    keys ``cfg`` already has. Values are cast with the scheduler's run options; ``None`` (or
    an empty value) means unset. A key that is no run option is skipped with a warning,
    unless it looks like a misspelt one.

    >>> import io
    >>> from anylaunch.specs import runopts
    >>> opts = runopts()
    >>> opts.add("log_dir", type_=str, help="where logs go")
    >>> opts.add("tags", type_=list[str], help="tags")
    >>> cfg = {"log_dir": "/explicit"}
    >>> load("local_cwd", io.StringIO("[local_cwd]\\nlog_dir = /file\\ntags = a;b\\n"), cfg, opts=opts)
    >>> cfg
    {'log_dir': '/explicit', 'tags': ['a', 'b']}

    Args:
        scheduler: the scheduler (section) name
        f: the open config file
        cfg: the run config to fill, in place
        opts: the scheduler's run options (created from the scheduler registry if omitted)

    Raises:
        InvalidConfigFileError: the file is malformed, or the section has a misspelt option,
            an uncastable value, a FIXME placeholder, or one option under two spellings with
            different values (naming the file, section and key; never the value).
    """
    path = str(getattr(f, "name", "<config>"))
    _load_parsed(scheduler, _read(f, path), path, cfg, opts)


def _load_parsed(
    scheduler: str,
    parser: configparser.ConfigParser,
    path: str,
    cfg: MutableMapping[str, CfgVal],
    opts: runopts | None,
) -> runopts | None:
    if not parser.has_section(scheduler) or not parser.items(scheduler):
        return opts
    if opts is None:
        opts = _scheduler_run_opts(scheduler)
    present = _canonical_keys(cfg, opts)
    known = [name for name, _ in opts]
    spellings: dict[str, list[tuple[str, str]]] = {}
    for key, value in parser.items(scheduler):
        if opts.get(key) is None:
            _unknown_key(path, scheduler, key, known)
            continue
        name = key if key in known else camel_to_snake(key)
        spellings.setdefault(name, []).append((key, value))
    for name, written in spellings.items():
        if name in present:
            continue  # an explicit or higher-precedence value wins
        opt = opts.get(name)
        assert opt is not None  # every name here is a known option
        key, value = written[0]
        cfg[name] = _cast(path, scheduler, key, value, opt)
        for other_key, other_value in written[1:]:
            if _cast(path, scheduler, other_key, other_value, opt) != cfg[name]:
                raise _ConflictingSpellingsError(
                    path,
                    scheduler,
                    other_key,
                    f"<{type(cfg[name]).__name__}>",
                    f"run option {name} is also set as {key} in this section, to another value",
                    f"keep one of them, as {name}",
                )
        present.add(name)
    return opts


class _ConflictingSpellingsError(InvalidConfigFileError, InvalidRunConfigException):
    """One section sets an option under two spellings (``logDir`` and ``log_dir``) to
    different values. An InvalidRunConfigException too, as in TorchX."""


def _unknown_key(path: str, scheduler: str, key: str, known: Sequence[str]) -> None:
    """A key that is no run option: an error if it looks like a misspelt one (the run would
    silently use the default), else skipped with a warning, as TorchX does (e.g. an option
    of another version of the scheduler). The value is never shown: it may be a secret."""
    hint = did_you_mean(key, known) or did_you_mean(key.lower(), known)
    options = ", ".join(sorted(known)) or "(none)"
    if hint:
        raise InvalidConfigFileError(
            path,
            scheduler,
            key,
            "<not shown>",
            f"not a run option of the {scheduler} scheduler.{hint}",
            f"rename or remove it; options: {options} "
            f"(`anylaunch runopts {scheduler}` explains them)",
        )
    log.warning(
        "%s: [%s] %s is not a run option of the %s scheduler and is ignored; remove it to "
        "silence this warning (options: %s)",
        path,
        scheduler,
        key,
        scheduler,
        options,
    )


def apply(
    scheduler: str,
    cfg: MutableMapping[str, CfgVal],
    dirs: Sequence[str] | None = None,
    *,
    opts: runopts | None = None,
) -> None:
    """Fills ``cfg`` in place from the ``[scheduler]`` sections of the config files, without
    overriding keys it already has (explicit > $HOME file > CWD file > scheduler defaults).

    >>> import os, tempfile
    >>> from anylaunch.specs import runopts
    >>> opts = runopts()
    >>> opts.add("log_dir", type_=str, help="where logs go")
    >>> opts.add("verbose", type_=bool, default=False, help="chatty")
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, ".anylaunchconfig"), "w").write(
    ...     "[local_cwd]\\nlog_dir = /file\\nverbose = true\\n")
    >>> cfg = {"logDir": "/explicit"}
    >>> apply("local_cwd", cfg, dirs=[d], opts=opts)
    >>> cfg
    {'logDir': '/explicit', 'verbose': True}

    Args:
        scheduler: the scheduler whose section to apply
        cfg: the run config to fill
        dirs: directories to look in, highest precedence first (see :func:`find_configs`)
        opts: the scheduler's run options (created from the scheduler registry if omitted)

    Raises:
        FileNotFoundError: ``$ANYLAUNCHCONFIG`` names no file (see :func:`find_configs`).
        InvalidConfigFileError: a file or its ``[scheduler]`` section is invalid (see
            :func:`load`).
    """
    if not isinstance(scheduler, str) or not scheduler:
        raise InvalidSpecError(
            "scheduler", scheduler, "must be a non-empty str", "pass a name such as 'local_cwd'"
        )
    if not isinstance(cfg, MutableMapping):
        raise InvalidSpecError(
            "cfg", cfg, "must be a dict to fill in place", "pass a dict, e.g. cfg = dict(cfg)"
        )
    for path in find_configs(dirs):
        parser = _read_path(path)
        _warn_unknown_sections(parser, path, scheduler)
        opts = _load_parsed(scheduler, parser, path, cfg, opts)
        log.debug("applied [%s] from %s", scheduler, path)


def _warn_unknown_sections(parser: configparser.ConfigParser, path: str, applied: str) -> None:
    """A plain ``[name]`` section configures the scheduler of that name: one that names no
    scheduler (``[local_cwdd]``) would be ignored without a word, so say so. The ``applied``
    scheduler's own section is being read: never warn about it (a Runner may know schedulers
    that the registry does not)."""
    names = [
        s
        for s in parser.sections()
        if CONFIG_PREFIX_DELIM not in s and s not in (_NO_DEFAULT_SECTION, applied, GLOBAL_SECTION)
    ]
    if not names:
        return
    known = get_scheduler_factories()
    for name in names:
        if name not in known:
            log.warning(
                "%s: section [%s] names no scheduler and is ignored.%s Known schedulers: %s",
                path,
                name,
                did_you_mean(name, known),
                ", ".join(known),
            )


def load_sections(prefix: str, dirs: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
    """Returns the sections named ``{prefix}:{name}``, as ``{name: {key: value}}``, merged
    across the config files (a key comes from the highest-precedence file that has it).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, ".anylaunchconfig"), "w").write(
    ...     "[component:dist.ddp]\\nj = 1x2\\n[cli:run]\\nscheduler = local_cwd\\n")
    >>> load_sections("component", dirs=[d])
    {'dist.ddp': {'j': '1x2'}}
    """
    _check_name("prefix", prefix)
    sections: dict[str, dict[str, str]] = {}
    for path in find_configs(dirs):
        parser = _read_path(path)
        for section_name in parser.sections():
            head, sep, name = section_name.partition(CONFIG_PREFIX_DELIM)
            if not sep or head != prefix or not name:
                continue
            section = sections.setdefault(name, {})
            for key, value in parser.items(section_name):
                section.setdefault(key, value)
    return sections


def get_configs(prefix: str, name: str, dirs: Sequence[str] | None = None) -> dict[str, str]:
    """Returns the keys of section ``[{prefix}:{name}]`` (empty if there is none).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, ".anylaunchconfig"), "w").write("[cli:run]\\nscheduler = x\\n")
    >>> get_configs("cli", "run", dirs=[d]), get_configs("cli", "other", dirs=[d])
    ({'scheduler': 'x'}, {})
    """
    _check_name("name", name)
    return load_sections(prefix, dirs).get(name, {})


def get_config(prefix: str, name: str, key: str, dirs: Sequence[str] | None = None) -> str | None:
    """Returns ``key`` of section ``[{prefix}:{name}]``, or None.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, ".anylaunchconfig"), "w").write("[cli:run]\\nscheduler = x\\n")
    >>> get_config("cli", "run", "scheduler", dirs=[d]), get_config("cli", "run", "nope", dirs=[d])
    ('x', None)
    """
    _check_name("key", key)
    return get_configs(prefix, name, dirs).get(key)


def get_global(key: str, dirs: Sequence[str] | None = None) -> str | None:
    """Returns ``key`` of the ``[anylaunch]`` section (settings of anylaunch itself, such as
    ``archive_url`` and ``checkpoint_root``), from the highest-precedence file that has it.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, ".anylaunchconfig"), "w").write(
    ...     "[anylaunch]\\narchive_url = file:///srv/archive\\n")
    >>> get_global("archive_url", dirs=[d]), get_global("checkpoint_root", dirs=[d])
    ('file:///srv/archive', None)
    """
    _check_name("key", key)
    for path in find_configs(dirs):
        parser = _read_path(path)
        if parser.has_option(GLOBAL_SECTION, key):
            return parser.get(GLOBAL_SECTION, key)
    return None


def _check_name(field: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidSpecError(field, value, "must be a non-empty str", "e.g. 'component'")


def _format_default(opt: runopt) -> str | None:
    """The option's default as a config value (``None`` for no default or an empty list or
    dict, as TorchX writes them), or None if it would not load back as the same value.

    >>> _format_default(runopt(["a", "b"], list[str], False, "")), _format_default(runopt([], list[str], False, ""))
    ('a;b', 'None')
    >>> _format_default(runopt(["a;b"], list[str], False, "")) is None
    True
    """
    value = opt.default
    if value is None or (isinstance(value, (list, dict)) and not value):
        return "None"
    if isinstance(value, list):
        text = ";".join(value)
    elif isinstance(value, dict):
        text = ",".join(f"{k}:{v}" for k, v in value.items())
    else:
        text = str(value)
    if text in _UNSET:
        return "None"  # reads back as unset: the default ("" or "None") applies
    if "\n" in text or text != text.strip() or _is_placeholder(text):
        return None
    try:
        return text if opt.cast_to_type(text) == value else None
    except (TypeError, ValueError):
        return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _type_label(opt: runopt) -> str:
    tp = opt.opt_type
    return tp.__name__ if isinstance(tp, type) and tp.__module__ == "builtins" else str(tp)


def dump(f: TextIO, schedulers: Sequence[str] | None = None, required_only: bool = False) -> None:
    """Writes a ``.anylaunchconfig`` template of the schedulers' run options to ``f``.

    As in TorchX, each scheduler gets a ``[name]`` section; optional options are pre-filled
    with their defaults (``None`` for none) and required ones get a ``FIXME`` placeholder
    that must be replaced (loading it is an error). Each option follows a comment with its
    type and help. A default that cannot be written as a value (e.g. a list item holding
    ``;``) is left commented out. A scheduler whose module or SDK cannot be loaded is skipped
    with a comment saying why.

    >>> import io
    >>> out = io.StringIO()
    >>> dump(out, schedulers=["local_cwd"])
    >>> print(out.getvalue())
    # ...
    [local_cwd]
    ...
    cancel_grace_s = 5.0
    ...
    log_dir = None
    ...
    >>> dump(out, schedulers=["no_such_scheduler_xyz"])
    Traceback (most recent call last):
    ...
    anylaunch.specs.errors.UnknownSchedulerException: unknown scheduler 'no_such_scheduler_xyz'. ...

    Args:
        f: where to write
        schedulers: scheduler names (default: every registered scheduler)
        required_only: write only the required options

    Raises:
        ValueError: a scheduler name is unknown (an UnknownSchedulerException); nothing
            is written then.
    """
    from anylaunch.specs.errors import UnknownSchedulerException

    if isinstance(schedulers, str):
        raise InvalidSpecError(
            "schedulers",
            schedulers,
            "must be a list of scheduler names, not a str",
            f"pass schedulers=[{schedulers!r}]",
        )
    known = get_scheduler_factories()
    names = list(schedulers) if schedulers else list(known)
    for name in names:  # unknown names fail before anything is written
        if not isinstance(name, str) or name not in known:
            raise UnknownSchedulerException(str(name), known)
    f.write(
        f"# {CONFIG_FILE}: anylaunch defaults (INI). Sections: [SCHEDULER] run options,\n"
        "# [component:NAME] component arguments, [cli:run] `anylaunch run` defaults.\n"
        f"# Replace every {FIXME}. Optional options hold the scheduler's defaults: remove\n"
        "# the ones you keep as they are, so that a later change of a default reaches you.\n"
    )
    for name in names:
        try:
            sched = _get_scheduler(name)
            try:
                opts = sched.run_opts()
            finally:
                sched.close()
        except Exception as e:  # any plugin or SDK failure: skip it, never fail the template
            reason = _one_line(str(e)) or type(e).__name__
            f.write(f"\n# [{name}] skipped: {reason}\n")
            continue
        f.write(f"\n[{name}]\n")
        ordered = sorted(opts, key=lambda item: (not item[1].is_required, item[0]))
        for opt_name, opt in ordered:
            if required_only and not opt.is_required:
                continue
            kind = "required" if opt.is_required else f"default: {opt.default}"
            f.write(f"# {opt_name} ({_type_label(opt)}, {kind}): {_one_line(opt.help)}\n")
            if opt.is_required:
                f.write(f"{opt_name} = {FIXME}\n")
                continue
            value = _format_default(opt)
            if value is None:
                f.write(f"# {opt_name} = (its default cannot be written as a value)\n")
            else:
                f.write(f"{opt_name} = {value}\n")
