"""Tests for StructuredOpts: typed scheduler run options declared as dataclass fields."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anylaunch.specs.errors import InvalidRunConfigException
from anylaunch.specs.runopts import runopts
from anylaunch.specs.structured_opts import StructuredOpts

CORE = str(Path(__file__).resolve().parents[2] / "core")


@dataclass
class K8sOpts(StructuredOpts):
    context: str = "default"
    """Kubernetes context to submit to."""

    service_account: Optional[str] = None
    """Service account the pods run as."""


@dataclass
class ClusterOpts(StructuredOpts):
    hpc_identity: str
    """Identity used to authenticate to the cluster."""

    num_retries: int = 3
    """Number of retry attempts.

    Counted per role.
    """

    priority: float = field(default=1, metadata={"help": "scheduling priority (metadata wins)"})
    """This docstring is shadowed by the metadata help."""

    preemptible: bool = False
    tags: List[str] = field(default_factory=lambda: ["a", "b"])
    """Tags put on the job."""

    labels: Dict[str, str] = field(default_factory=dict)
    """Labels put on the job."""

    quota: int | None = None
    """Optional quota."""

    k8s: K8sOpts = field(default_factory=lambda: K8sOpts(context="prod"))
    """Kubernetes settings."""


def _opt(cls: type[StructuredOpts], key: str):  # type: ignore[no-untyped-def]
    opt = cls.as_runopts().get(key)
    assert opt is not None, key
    return opt


def test_runopts_types_required_and_defaults() -> None:
    opts = dict(ClusterOpts.as_runopts())
    assert list(opts) == [
        "hpc_identity",
        "num_retries",
        "priority",
        "preemptible",
        "tags",
        "labels",
        "quota",
        "k8s.context",
        "k8s.service_account",
    ]
    expected = {
        "hpc_identity": (str, True, None),
        "num_retries": (int, False, 3),
        "priority": (float, False, 1.0),
        "preemptible": (bool, False, False),
        "tags": (list[str], False, ["a", "b"]),
        "labels": (dict[str, str], False, {}),
        "quota": (int, False, None),
        "k8s.context": (str, False, "prod"),  # from the parent field's default instance
        "k8s.service_account": (str, False, None),
    }
    for key, (tp, required, default) in expected.items():
        assert (opts[key].opt_type, opts[key].is_required, opts[key].default) == (
            tp,
            required,
            default,
        ), key
    assert isinstance(opts["priority"].default, float)


def test_help_from_docstrings_metadata_and_generated() -> None:
    assert _opt(ClusterOpts, "hpc_identity").help == "Identity used to authenticate to the cluster."
    assert _opt(ClusterOpts, "num_retries").help == "Number of retry attempts.\n\nCounted per role."
    assert _opt(ClusterOpts, "priority").help == "scheduling priority (metadata wins)"
    assert _opt(ClusterOpts, "k8s.context").help == "Kubernetes context to submit to."
    # no docstring and no metadata: generated from the name and type
    help_text = _opt(ClusterOpts, "preemptible").help
    assert "preemptible" in help_text and "bool" in help_text


def test_as_runopts_returns_an_independent_copy() -> None:
    first = ClusterOpts.as_runopts()
    first.add("extra", type_=str, help="added by a caller")
    assert "extra" not in ClusterOpts.as_runopts()
    assert isinstance(first, runopts)


def test_inherited_fields_keep_their_docstrings() -> None:
    @dataclass
    class Extended(K8sOpts):
        namespace: str = "ns"
        """Namespace of the job."""

    assert _opt(Extended, "context").help == "Kubernetes context to submit to."
    assert _opt(Extended, "namespace").help == "Namespace of the job."


def test_class_defined_in_a_function_with_unindented_docstring_lines() -> None:
    @dataclass
    class Local(StructuredOpts):
        queue: str = "gpu"
        """Queue of the job,
which continues at column zero."""

    assert _opt(Local, "queue").help == "Queue of the job,\nwhich continues at column zero."


def test_class_without_source_gets_generated_help_and_not_another_classes_docs() -> None:
    # exec'd code has no source; ClusterOpts of this module has the same name, and its
    # docstrings must not be borrowed.
    namespace: dict[str, object] = {"__name__": __name__}
    code = textwrap.dedent(
        """
        from dataclasses import dataclass
        from anylaunch.specs.structured_opts import StructuredOpts

        @dataclass
        class ClusterOpts(StructuredOpts):
            hpc_identity: int = 1
            '''A docstring nobody can read back.'''
        """
    )
    exec(compile(code, "<no source>", "exec"), namespace)
    cls = namespace["ClusterOpts"]
    assert isinstance(cls, type) and issubclass(cls, StructuredOpts)
    assert _opt(cls, "hpc_identity").help == "hpc_identity (int)"


def test_future_annotations_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "future_opts_mod.py").write_text(
        textwrap.dedent(
            '''
            from __future__ import annotations
            from dataclasses import dataclass, field
            from typing import Optional
            from anylaunch.specs.structured_opts import StructuredOpts

            @dataclass
            class Inner(StructuredOpts):
                depth: int = 2
                """How deep."""

            @dataclass
            class FutureOpts(StructuredOpts):
                names: list[str]
                """Names."""
                mapping: dict[str, str] | None = None
                count: Optional[int] = 4
                inner: Inner = field(default_factory=Inner)
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("future_opts_mod")
    opts = dict(mod.FutureOpts.as_runopts())
    assert opts["names"].opt_type == list[str] and opts["names"].is_required
    assert opts["names"].help == "Names."
    assert opts["mapping"].opt_type == dict[str, str]
    assert (opts["count"].opt_type, opts["count"].default) == (int, 4)
    assert (opts["inner.depth"].default, opts["inner.depth"].help) == (2, "How deep.")
    inst = mod.FutureOpts.from_cfg({"names": "x;y", "inner.depth": "7"})
    assert inst == mod.FutureOpts(names=["x", "y"], inner=mod.Inner(depth=7))


def test_from_cfg_camel_case_defaults_and_get() -> None:
    opts = ClusterOpts.from_cfg({"hpcIdentity": "me", "numRetries": 5, "k8s.serviceAccount": "sa"})
    assert opts == ClusterOpts(
        hpc_identity="me", num_retries=5, k8s=K8sOpts(context="prod", service_account="sa")
    )
    assert opts.get("hpcIdentity") == "me"
    assert opts.get("num_retries") == 5
    assert opts.get("k8s.serviceAccount") == "sa"
    assert opts.get("k8s") == K8sOpts(context="prod", service_account="sa")
    assert opts.get("missing") is None
    assert opts.get("missing", "fallback") == "fallback"
    assert opts.get("k8s.nope", 0) == 0


def test_from_cfg_does_not_share_mutable_defaults() -> None:
    one = ClusterOpts.from_cfg({"hpc_identity": "a"})
    one.tags.append("mutated")
    one.labels["x"] = "y"
    two = ClusterOpts.from_cfg({"hpc_identity": "b"})
    assert two.tags == ["a", "b"] and two.labels == {}
    given_tags = ["t"]
    three = ClusterOpts.from_cfg({"hpc_identity": "c", "tags": given_tags})
    three.tags.append("u")
    assert given_tags == ["t"]


def test_from_cfg_int_for_float_becomes_float() -> None:
    opts = ClusterOpts.from_cfg({"hpc_identity": "a", "priority": 2})
    assert opts.priority == 2.0 and isinstance(opts.priority, float)


def test_from_cfg_casts_strings_for_non_str_fields() -> None:
    opts = ClusterOpts.from_cfg(
        {
            "hpc_identity": "123",  # a str field keeps its string
            "num_retries": "7",
            "priority": "0.25",
            "preemptible": "True",
            "tags": "x,y;z",
            "labels": "team:ml,tier:1",
            "quota": "9",
        }
    )
    assert opts.hpc_identity == "123"
    assert (opts.num_retries, opts.priority, opts.preemptible) == (7, 0.25, True)
    assert opts.tags == ["x", "y", "z"]
    assert opts.labels == {"team": "ml", "tier": "1"}
    assert opts.quota == 9


@pytest.mark.parametrize(
    ("cfg", "key", "value", "in_message"),
    [
        ({"hpc_identity": "a", "num_retries": "many"}, "num_retries", "many", "int"),
        ({"hpc_identity": "a", "preemptible": "maybe"}, "preemptible", "maybe", "bool"),
        ({"hpc_identity": "a", "labels": "novalue"}, "labels", "novalue", "KEY:VALUE"),
        ({"hpc_identity": "a", "num_retries": 1.5}, "num_retries", 1.5, "expected int"),
        ({"hpc_identity": 3}, "hpc_identity", 3, "expected str"),
        (
            {"hpc_identity": "a", "num_retires": 1},
            "num_retires",
            "<int>",
            "Did you mean 'num_retries'",
        ),
        ({"hpc_identity": "a", "k8s.contxt": "x"}, "k8s.contxt", "<str>", "k8s.context"),
        ({}, "hpc_identity", None, "required"),
        ({"num_retries": 1}, "hpc_identity", None, "required"),
    ],
)
def test_from_cfg_errors_name_key_value_and_fix(
    cfg: dict[str, object], key: str, value: object, in_message: str
) -> None:
    with pytest.raises(InvalidRunConfigException) as info:
        ClusterOpts.from_cfg(cfg)  # type: ignore[arg-type]
    assert info.value.field == key
    assert info.value.value == value
    assert in_message in str(info.value)
    assert info.value.fix


def test_from_cfg_rejects_a_non_mapping() -> None:
    with pytest.raises(InvalidRunConfigException, match="mapping"):
        ClusterOpts.from_cfg([("hpc_identity", "a")])  # type: ignore[arg-type]


@dataclass
class Leaf(StructuredOpts):
    value: int
    """A required value."""


@dataclass
class Middle(StructuredOpts):
    leaf: Leaf
    name: str = "mid"


@dataclass
class Root(StructuredOpts):
    middle: Middle
    flag: bool = True


def test_nested_flattening_is_recursive_both_ways() -> None:
    opts = dict(Root.as_runopts())
    assert list(opts) == ["middle.leaf.value", "middle.name", "flag"]
    # the nested fields have no default, so the nested class's required flags apply
    assert opts["middle.leaf.value"].is_required
    assert opts["middle.leaf.value"].help == "A required value."
    inst = Root.from_cfg({"middle.leaf.value": "5", "middle.name": "m"})
    assert inst == Root(middle=Middle(leaf=Leaf(value=5), name="m"))
    assert inst.to_cfg() == {"middle.leaf.value": 5, "middle.name": "m", "flag": True}
    assert inst.get("middle.leaf.value") == 5
    with pytest.raises(InvalidRunConfigException) as info:
        Root.from_cfg({"middle.name": "m"})
    assert info.value.field == "middle.leaf.value"


def test_to_cfg_is_flat_and_copies_containers() -> None:
    inst = ClusterOpts(hpc_identity="me", tags=["t"])
    cfg = inst.to_cfg()
    assert cfg == {
        "hpc_identity": "me",
        "num_retries": 3,
        "priority": 1,
        "preemptible": False,
        "tags": ["t"],
        "labels": {},
        "quota": None,
        "k8s.context": "prod",
        "k8s.service_account": None,
    }
    assert cfg["tags"] is not inst.tags
    assert ClusterOpts.from_cfg(cfg) == inst


def test_not_a_dataclass_raises_type_error_naming_the_class() -> None:
    class Undecorated(StructuredOpts):
        cluster: str = "x"

    with pytest.raises(TypeError, match=r"Undecorated is not a dataclass.*cluster.*@data"):
        Undecorated.as_runopts()
    with pytest.raises(TypeError, match="StructuredOpts is not a dataclass"):
        StructuredOpts.as_runopts()


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        (list[int], "list[int]"),
        (set[str], "set[str]"),
        (dict[str, int], "dict[str, int]"),
        (int | str, "int | str"),
        (bytes, "bytes"),
    ],
)
def test_unsupported_field_type_raises_type_error(annotation: object, shown: str) -> None:
    bad = dataclass(type("BadOpts", (StructuredOpts,), {"__annotations__": {"bad": annotation}}))
    with pytest.raises(TypeError) as info:
        bad.as_runopts()
    message = str(info.value)
    assert "BadOpts.bad" in message and shown in message
    assert "list[str], dict[str, str]" in message  # names the supported types


def test_nested_opts_in_a_union_with_another_type_is_rejected() -> None:
    # Optional[K8sOpts] is an optional group (tests/specs/test_torchx_parity_opts.py)
    @dataclass
    class WithUnionNested(StructuredOpts):
        k8s: K8sOpts | int = 1

    with pytest.raises(TypeError, match=r"WithUnionNested\.k8s.*combined with None"):
        WithUnionNested.as_runopts()


def test_default_of_the_wrong_type_raises_type_error() -> None:
    @dataclass
    class WrongDefault(StructuredOpts):
        count: int = "three"  # type: ignore[assignment]

    with pytest.raises(TypeError, match=r"WrongDefault\.count"):
        WrongDefault.as_runopts()


def test_init_false_fields_are_not_options() -> None:
    @dataclass
    class Computed(StructuredOpts):
        a: int = 1
        double: int = field(init=False, default=0)

        def __post_init__(self) -> None:
            self.double = 2 * self.a

    assert [name for name, _ in Computed.as_runopts()] == ["a"]
    assert Computed.from_cfg({"a": 4}).double == 8


# --- help text in real interpreters: python -OO, a zip app, and a pyc-only install -------------

OPTS_MODULE = '''
from dataclasses import dataclass, field
from anylaunch.specs.structured_opts import StructuredOpts


@dataclass
class ZipOpts(StructuredOpts):
    """Class docstring: gone under -OO."""

    cluster: str = "default"
    """Name of the cluster to submit to."""

    queue: str = field(default="gpu", metadata={"help": "Queue from metadata."})
'''

PRINT_HELP = (
    "import sys, {mod}; from {mod} import ZipOpts; "
    "print(sys.flags.optimize, 'gone under' in ZipOpts.__doc__); print({mod}.__file__); "
    "[print(k + '=' + o.help) for k, o in ZipOpts.as_runopts()]"
)


def _run(args: list[str], cwd: Path, pythonpath: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_help_text_under_python_OO(tmp_path: Path) -> None:
    (tmp_path / "oo_opts.py").write_text(OPTS_MODULE)
    lines = _run(["-OO", "-c", PRINT_HELP.format(mod="oo_opts")], tmp_path, [str(tmp_path), CORE])
    assert lines[0] == "2 False"  # -OO is active: the class docstring is stripped
    assert lines[2:] == ["cluster=Name of the cluster to submit to.", "queue=Queue from metadata."]


@pytest.mark.parametrize("flags", [[], ["-OO"]])
def test_help_text_from_a_zipapp(tmp_path: Path, flags: list[str]) -> None:
    app = tmp_path / "app.pyz"
    with zipfile.ZipFile(app, "w") as zf:  # sources only: no .pyc in the archive
        zf.writestr("zip_opts.py", OPTS_MODULE)
        zf.writestr("__main__.py", PRINT_HELP.format(mod="zip_opts").replace("; ", "\n"))
    lines = _run([*flags, str(app)], tmp_path, [CORE])
    assert lines[0] == ("2 False" if flags else "0 True")
    assert lines[1] == str(app / "zip_opts.py")  # imported from inside the zip
    assert lines[2:] == ["cluster=Name of the cluster to submit to.", "queue=Queue from metadata."]


def test_pyc_only_module_falls_back_to_generated_help(tmp_path: Path) -> None:
    source = tmp_path / "src" / "pyc_opts.py"
    source.parent.mkdir()
    source.write_text(OPTS_MODULE)
    installed = tmp_path / "site"
    installed.mkdir()
    py_compile.compile(str(source), cfile=str(installed / "pyc_opts.pyc"), doraise=True)
    lines = _run(["-c", PRINT_HELP.format(mod="pyc_opts")], tmp_path, [str(installed), CORE])
    assert lines[1] == str(installed / "pyc_opts.pyc")
    assert lines[2:] == ["cluster=cluster (str)", "queue=Queue from metadata."]


# --- property: to_cfg / from_cfg round-trip -----------------------------------------------------


@dataclass
class AllTypes(StructuredOpts):
    s: str
    i: int
    f: float
    b: bool
    ls: list[str]
    ds: dict[str, str]
    oi: Optional[int] = None
    os_: str | None = None
    nested: K8sOpts = field(default_factory=K8sOpts)


_texts = st.text(max_size=20)


@given(
    st.builds(
        AllTypes,
        s=_texts,
        i=st.integers(),
        f=st.floats(allow_nan=False, allow_infinity=False),
        b=st.booleans(),
        ls=st.lists(_texts, max_size=5),
        ds=st.dictionaries(_texts, _texts, max_size=5),
        oi=st.none() | st.integers(),
        os_=st.none() | _texts,
        nested=st.builds(K8sOpts, context=_texts, service_account=st.none() | _texts),
    )
)
def test_to_cfg_from_cfg_round_trip(inst: AllTypes) -> None:
    assert AllTypes.from_cfg(inst.to_cfg()) == inst


@given(i=st.integers(), f=st.floats(allow_nan=False, allow_infinity=False), b=st.booleans())
def test_string_forms_cast_back(i: int, f: float, b: bool) -> None:
    inst = AllTypes.from_cfg({"s": "x", "i": str(i), "f": repr(f), "b": str(b), "ls": [], "ds": {}})
    assert (inst.i, inst.f, inst.b) == (i, f, b)
