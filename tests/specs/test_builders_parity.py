"""builders parity with TorchX: cmpnt_defaults/config precedence, ComponentArgs and
component_args_from_str, parameters of types text cannot be parsed into, tuple parameters,
and the names TorchX imports from torchx.specs.builders."""

import os
from typing import NamedTuple, Optional

import pytest

from anylaunch.specs import AppDef, Role
from anylaunch.specs.builders import (
    BindMount,
    ComponentArgs,
    ComponentArgsError,
    ComponentTypeError,
    DeviceMount,
    MountType,
    VolumeMount,
    component_args_from_str,
    make_app_handle,
    materialize_appdef,
    parse_args,
    parse_mounts,
)
from anylaunch.specs.errors import InvalidSpecError


def _app(*args: object) -> AppDef:
    return AppDef(
        "app", roles=[Role("r", image="/tmp", entrypoint="echo", args=[str(a) for a in args])]
    )


def trainer(
    script: str,
    *script_args: str,
    nnodes: int = 1,
    lr: float = 0.1,
    debug: bool = False,
    env: Optional[dict[str, str]] = None,
    tags: Optional[list[str]] = None,
) -> AppDef:
    """Trains.

    Args:
        script: the script
        script_args: its arguments
        nnodes: number of nodes
        lr: learning rate
        debug: debug mode
        env: environment
        tags: tags
    """
    return _app(script, *script_args, nnodes, lr, debug, env, tags)


# --------------------------------------------------------------------------------------------
# precedence: command line > config > cmpnt_defaults > signature
# --------------------------------------------------------------------------------------------


def test_each_source_wins_over_the_ones_below_it() -> None:
    defaults = {"nnodes": "2", "lr": "0.2", "debug": "true"}
    config = {"nnodes": 3, "lr": 0.3}
    ns = parse_args(trainer, ["--script", "s", "--nnodes", "4"], defaults, config)
    assert (ns.nnodes, ns.lr, ns.debug, ns.env) == (4, 0.3, True, None)
    ns = parse_args(trainer, ["--script", "s"], cmpnt_defaults=defaults, config=config)
    assert (ns.nnodes, ns.lr, ns.debug) == (3, 0.3, True)
    ns = parse_args(trainer, ["--script", "s"], cmpnt_defaults=defaults)
    assert (ns.nnodes, ns.lr, ns.debug) == (2, 0.2, True)
    ns = parse_args(trainer, ["--script", "s"])
    assert (ns.nnodes, ns.lr, ns.debug) == (1, 0.1, False)


def test_config_fills_required_parameters() -> None:
    app = materialize_appdef(trainer, [], config={"script": "from_config.py"})
    assert app.roles[0].args[0] == "from_config.py"
    ns = parse_args(trainer, ["--script", "cli.py"], config={"script": "from_config.py"})
    assert ns.script == "cli.py"


def test_missing_required_without_config_is_still_an_error() -> None:
    with pytest.raises(ComponentArgsError, match="required: --script"):
        parse_args(trainer, [], config={"nnodes": 2})


@pytest.mark.parametrize(
    ("cli", "config", "defaults", "expected"),
    [
        (["a", "b"], {"script_args": ["c"]}, {"script_args": "d"}, ["a", "b"]),
        ([], {"script_args": ["c", "--x"]}, {"script_args": "d"}, ["c", "--x"]),
        ([], {"script_args": "--c 'd e'"}, None, ["--c", "d e"]),
        ([], None, {"script_args": "d"}, ["d"]),
        (["--"], {"script_args": ["c"]}, None, []),  # an explicit empty remainder
        ([], None, None, []),
    ],
)
def test_config_fills_varargs(
    cli: list[str], config: dict[str, object], defaults: dict[str, str], expected: list[str]
) -> None:
    ns = parse_args(trainer, ["--script", "s", *cli], defaults, config)
    assert ns.script_args == expected


def test_config_values_are_typed_or_text() -> None:
    config = {"env": {"A": "1"}, "tags": ["x", "y"], "debug": True, "lr": 1, "nnodes": "5"}
    ns = parse_args(trainer, ["--script", "s"], config=config)
    assert (ns.env, ns.tags, ns.debug, ns.lr, ns.nnodes) == ({"A": "1"}, ["x", "y"], True, 1.0, 5)
    ns = parse_args(trainer, ["--script", "s"], config={"env": "A=1,B=2", "tags": "p,q"})
    assert (ns.env, ns.tags) == ({"A": "1", "B": "2"}, ["p", "q"])


def test_config_none_for_an_optional_parameter() -> None:
    ns = parse_args(trainer, ["--script", "s"], {"env": "A=1"}, {"env": None})
    assert ns.env is None


def test_config_accepts_dashed_names() -> None:
    def comp(dry_run: bool = False) -> AppDef:
        return _app(dry_run)

    assert parse_args(comp, [], config={"dry-run": True}).dry_run is True


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"nnodes": "two"}, "invalid int value"),
        ({"nnodes": True}, "expected int, got bool"),
        ({"nnodes": 1.5}, "expected int, got float"),
        ({"script": 3}, "expected str, got int"),
        ({"tags": "a", "env": ["A=1"]}, "expected a mapping"),
        ({"tags": [1]}, "expected str, got int"),
        ({"script_args": 3}, "expected a list"),
    ],
)
def test_bad_config_value_names_the_key(config: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidSpecError, match=problem) as info:
        parse_args(trainer, ["--script", "s"], config=config)
    assert info.value.field.startswith("config[")
    assert "trainer" in info.value.field


def test_unknown_config_key_is_rejected_with_a_suggestion() -> None:
    with pytest.raises(InvalidSpecError, match="Did you mean 'nnodes'") as info:
        parse_args(trainer, ["--script", "s"], config={"nnode": 2})
    assert "nnode" in info.value.field


def test_config_value_is_not_shown_in_errors() -> None:
    def login(retries: int = 1) -> AppDef:
        return _app(retries)

    with pytest.raises(InvalidSpecError) as info:
        parse_args(login, [], config={"retries": ["s3cr3t"]})
    assert "s3cr3t" not in str(info.value)


def test_config_must_be_a_mapping() -> None:
    with pytest.raises(InvalidSpecError, match="must be a mapping") as info:
        parse_args(trainer, ["--script", "s"], config=["nnodes=2"])  # type: ignore[arg-type]
    assert info.value.field == "config"


def test_help_shows_config_supplied_values(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(trainer, ["--help"], config={"script": "secret-path.py"})
    out = capsys.readouterr().out
    assert "the script (default: from config)" in out
    assert "secret-path.py" not in out


def test_defaults_keyword_is_kept_and_cannot_be_combined() -> None:
    assert parse_args(trainer, ["--script", "s"], defaults={"nnodes": "7"}).nnodes == 7
    with pytest.raises(InvalidSpecError, match="both given"):
        parse_args(trainer, ["--script", "s"], {"nnodes": "7"}, defaults={"nnodes": "8"})


# --------------------------------------------------------------------------------------------
# ComponentArgs and component_args_from_str
# --------------------------------------------------------------------------------------------


def test_component_args_is_a_named_tuple() -> None:
    args = ComponentArgs({"a": 1}, ["x"], {"b": 2})
    assert isinstance(args, tuple)
    assert issubclass(ComponentArgs, tuple) and hasattr(ComponentArgs, "_fields")
    assert ComponentArgs._fields == ("positional_args", "var_args", "kwargs")
    positional, var_args, kwargs = args
    assert (positional, var_args, kwargs) == ({"a": 1}, ["x"], {"b": 2})
    assert args._replace(var_args=[]).var_args == []
    assert NamedTuple in getattr(ComponentArgs, "__orig_bases__", ())


@pytest.mark.parametrize(
    "cli",
    [
        ["--foo", "fooval", "--bar", "barval", "arg1", "arg2"],
        ["--foo=fooval", "--bar=barval", "arg1", "arg2"],
        ["--foo", "fooval", "--bar", "barval", "--", "arg1", "arg2"],
    ],
)
def test_component_args_from_str_groups_the_arguments(cli: list[str]) -> None:
    def example(foo: str, *args: str, bar: str = "asdf") -> AppDef:
        return _app(foo, *args, bar)

    parsed = component_args_from_str(example, cli)
    assert parsed.positional_args == {"foo": "fooval"}
    assert parsed.var_args == ["arg1", "arg2"]
    assert parsed.kwargs == {"bar": "barval"}


def test_component_args_from_str_keeps_signature_order_and_types() -> None:
    def comp(a: int, /, b: float, *rest: int, c: bool = False, d: str = "d") -> AppDef:
        return _app()

    parsed = component_args_from_str(comp, ["--b", "2", "--a", "1", "--c", "--", "7", "8"])
    assert list(parsed.positional_args.items()) == [("a", 1), ("b", 2.0)]
    assert parsed.var_args == [7, 8]
    assert parsed.kwargs == {"c": True, "d": "d"}


def test_component_args_from_str_takes_defaults_and_config() -> None:
    def comp(a: int, b: int = 0, c: int = 0) -> AppDef:
        return _app()

    parsed = component_args_from_str(comp, ["--a", "1"], {"b": "2", "c": "2"}, {"c": 3})
    assert parsed.positional_args == {"a": 1, "b": 2, "c": 3}
    parsed = component_args_from_str(comp, [], cmpnt_defaults={"a": "4"})
    assert parsed.positional_args["a"] == 4
    with pytest.raises(InvalidSpecError, match="both given"):
        component_args_from_str(comp, [], {"a": "1"}, cmpnt_defaults={"a": "2"})


def test_materialize_appdef_calls_with_the_grouped_arguments() -> None:
    def comp(a: str, *rest: str, k: str = "k") -> AppDef:
        return _app(a, *rest, k)

    app = materialize_appdef(comp, ["--k", "K"], config={"a": "A", "rest": ["r1", "r2"]})
    assert app.roles[0].args == ["A", "r1", "r2", "K"]


# --------------------------------------------------------------------------------------------
# types text cannot be parsed into
# --------------------------------------------------------------------------------------------


class Shape:
    def __init__(self, n: int) -> None:
        self.n = n


DEFAULT_SHAPE = Shape(2)


def sized(msg: str, shape: Shape = DEFAULT_SHAPE, names: set[str] | None = None) -> AppDef:
    return _app(msg, shape.n, sorted(names or ()))


def test_unparsable_type_uses_its_default_when_no_value_is_given() -> None:
    assert materialize_appdef(sized, ["--msg", "hi"]).roles[0].args == ["hi", "2", "[]"]


def test_unparsable_type_fails_when_text_is_given() -> None:
    with pytest.raises(InvalidSpecError, match="cannot be parsed from text") as info:
        materialize_appdef(sized, ["--msg", "hi", "--shape", "3"])
    assert info.value.field == "sized(shape)"
    assert not isinstance(info.value, ComponentArgsError)
    with pytest.raises(InvalidSpecError, match=r"sized\(names\)"):
        parse_args(sized, ["--msg", "hi"], cmpnt_defaults={"names": "a,b"})
    with pytest.raises(InvalidSpecError, match=r"sized\(shape\)"):
        parse_args(sized, ["--msg", "hi"], config={"shape": "3"})


def test_unparsable_type_takes_a_typed_config_value() -> None:
    app = materialize_appdef(sized, ["--msg", "hi"], config={"shape": Shape(5), "names": {"b"}})
    assert app.roles[0].args == ["hi", "5", "['b']"]
    with pytest.raises(InvalidSpecError, match="expected Shape, got int"):
        parse_args(sized, ["--msg", "hi"], config={"shape": 5})


def test_help_says_an_unparsable_parameter_cannot_be_set(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse_args(sized, ["--help"])
    assert "shape [its type cannot be parsed from text: use its default]" in capsys.readouterr().out


def test_unparsable_varargs_without_values_are_fine() -> None:
    def comp(*items: set[str]) -> AppDef:
        return _app(*items)

    assert materialize_appdef(comp, []).roles[0].args == []
    with pytest.raises(InvalidSpecError, match=r"comp\(\*items\)"):
        materialize_appdef(comp, ["a"])


def test_unparsable_required_parameter_is_reported_as_missing() -> None:
    def comp(shape: Shape) -> AppDef:
        return _app(shape.n)

    with pytest.raises(ComponentArgsError, match="required: --shape"):
        parse_args(comp, [])
    assert materialize_appdef(comp, [], config={"shape": Shape(4)}).roles[0].args == ["4"]


# --------------------------------------------------------------------------------------------
# tuple parameters
# --------------------------------------------------------------------------------------------


def shaped(shape: tuple[int, str] = (1, "a"), dims: Optional[tuple[float, ...]] = None) -> AppDef:
    return _app(shape, dims)


def test_tuple_parameters_are_parsed() -> None:
    ns = parse_args(shaped, ["--shape", "2,x", "--dims", "1,2.5,3"])
    assert (ns.shape, ns.dims) == ((2, "x"), (1.0, 2.5, 3.0))
    assert parse_args(shaped, ["--dims="]).dims == ()
    assert parse_args(shaped, []).shape == (1, "a")


@pytest.mark.parametrize(
    ("cli", "problem"),
    [
        (["--shape", "2"], "expected 2 comma-separated values, got 1"),
        (["--shape", "x,y"], "invalid int value: 'x'"),
        (["--dims", "1,z"], "invalid float value: 'z'"),
    ],
)
def test_bad_tuple_values(cli: list[str], problem: str) -> None:
    with pytest.raises(ComponentArgsError, match=problem):
        parse_args(shaped, cli)


def test_tuple_from_config() -> None:
    ns = parse_args(shaped, [], config={"shape": [3, "z"], "dims": (1, 2)})
    assert (ns.shape, ns.dims) == ((3, "z"), (1.0, 2.0))
    with pytest.raises(InvalidSpecError, match="expected 2 values"):
        parse_args(shaped, [], config={"shape": [3]})


# --------------------------------------------------------------------------------------------
# TypeError where TorchX raises one
# --------------------------------------------------------------------------------------------


def test_non_appdef_return_is_a_type_error() -> None:
    def comp() -> AppDef:
        return {"not": "an app"}  # type: ignore[return-value]

    with pytest.raises(TypeError, match="must return an AppDef") as info:
        materialize_appdef(comp, [])
    assert isinstance(info.value, ComponentTypeError)
    assert isinstance(info.value, InvalidSpecError)


def test_kwargs_is_a_type_error() -> None:
    def comp(**kw: str) -> AppDef:
        return _app()

    with pytest.raises(TypeError, match=r"\*\*kwargs"):
        component_args_from_str(comp, [])


# --------------------------------------------------------------------------------------------
# names importable from builders; parse_mounts
# --------------------------------------------------------------------------------------------


def test_make_app_handle_from_builders() -> None:
    assert make_app_handle("local_cwd", "default", "echo-1") == "local_cwd://default/echo-1"


def test_mount_classes_are_the_specs_ones() -> None:
    from anylaunch import specs

    assert (BindMount, VolumeMount, DeviceMount) == (
        specs.BindMount,
        specs.VolumeMount,
        specs.DeviceMount,
    )
    assert parse_mounts is specs.parse_mounts
    assert [m.value for m in MountType] == ["bind", "volume", "device"]


def test_bind_mount_source_expands_the_home_directory() -> None:
    [mount] = parse_mounts(["type=bind", "src=~/data", "dst=/data"])
    assert mount == BindMount(os.path.expanduser("~/data"), "/data")
    assert not mount.src_path.startswith("~")
    [volume] = parse_mounts(["type=volume,src=~vol,dst=/v"])
    assert volume == VolumeMount("~vol", "/v")  # a volume name, not a path


@pytest.mark.parametrize(
    ("opt", "read_only"),
    [
        ("readonly", True),
        ("read_only", True),
        ("readonly=true", True),
        ("read_only=yes", True),
        ("readonly=false", False),
        ("readonly=0", False),
    ],
)
def test_read_only_forms(opt: str, read_only: bool) -> None:
    [mount] = parse_mounts([f"type=bind,src=/a,dst=/b,{opt}"])
    assert mount == BindMount("/a", "/b", read_only=read_only)


def test_bad_read_only_value_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="readonly='maybe'"):
        parse_mounts(["type=bind,src=/a,dst=/b,readonly=maybe"])
