import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anylaunch.specs import AppDef, Role
from anylaunch.specs.builders import ComponentArgsError, materialize_appdef, parse_args
from anylaunch.specs.errors import InvalidSpecError

FIXTURES = Path(__file__).parent / "fixtures" / "components"
# python -OO strips docstrings (the -OO behaviour itself is tested in a subprocess)
NEEDS_DOCSTRINGS = pytest.mark.skipif(sys.flags.optimize >= 2, reason="docstrings stripped")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"builders_fixture_{name}", FIXTURES / name)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


OLD = _load("old_style.py")
NEW = _load("new_style.py")
STYLES = pytest.mark.parametrize("module", [OLD, NEW], ids=["old_style", "new_style"])


def _echo_app(*args: str) -> AppDef:
    return AppDef(
        name="app", roles=[Role(name="r", image="/tmp", entrypoint="echo", args=list(args))]
    )


# --------------------------------------------------------------------------------------------
# Every supported type, in both typing styles
# --------------------------------------------------------------------------------------------


@STYLES
def test_all_supported_types_are_parsed(module: ModuleType) -> None:
    app = materialize_appdef(
        module.trainer,
        [
            "--script", "train.py",
            "--nnodes", "3",
            "--lr", "0.25",
            "--debug",
            "--env", "A=1,B=x=y",
            "--mounts", "/a,/b",
            "--ports", "http=80,grpc=9000",
            "--tags", "t1",
            "--image", "my:img",
        ],
    )  # fmt: skip
    assert isinstance(app, AppDef)
    role = app.roles[0]
    assert role.num_replicas == 3
    assert role.args == ["train.py", "--lr=0.25", "--debug=True"]
    assert role.env == {"A": "1", "B": "x=y"}
    assert role.port_map == {"http": 80, "grpc": 9000}
    assert role.metadata == {"mounts": ["/a", "/b"], "tags": ["t1"]}
    assert role.image == "my:img"


@STYLES
def test_function_defaults_and_optional_none(module: ModuleType) -> None:
    ns = parse_args(module.trainer, ["--script", "s.py"])
    assert vars(ns) == {
        "script": "s.py",
        "script_args": [],
        "nnodes": 1,
        "lr": 0.1,
        "debug": False,
        "env": None,
        "mounts": None,
        "ports": None,
        "tags": None,
        "image": None,
    }


def test_string_annotations_are_resolved() -> None:
    # old_style.echo annotates with "str" and "List[int]" and returns "AppDef"
    app = materialize_appdef(OLD.echo, ["--msg", "hi", "--count", "1,2"])
    assert app.roles[0].args == ["hi", "hi", "hi"]


def test_list_of_floats_and_empty_list() -> None:
    assert parse_args(NEW.flags, ["--dry_run", "--weights", "0.5,2"]).weights == [0.5, 2.0]
    assert parse_args(NEW.flags, ["--dry_run", "--weights="]).weights == []


def test_dict_value_with_commas_continues_the_previous_value() -> None:
    ns = parse_args(NEW.trainer, ["--script", "s", "--env", "PATH=/a,/b,LANG=C"])
    assert ns.env == {"PATH": "/a,/b", "LANG": "C"}


def test_empty_dict() -> None:
    assert parse_args(NEW.trainer, ["--script", "s", "--env", ""]).env == {}


# --------------------------------------------------------------------------------------------
# *args remainder
# --------------------------------------------------------------------------------------------


@STYLES
def test_remainder_after_double_dash_keeps_option_like_args(module: ModuleType) -> None:
    ns = parse_args(module.trainer, ["--script", "x", "--", "--foo", "bar"])
    assert ns.script == "x"
    assert ns.script_args == ["--foo", "bar"]


@STYLES
def test_remainder_without_double_dash_starts_at_first_value(module: ModuleType) -> None:
    ns = parse_args(module.trainer, ["--script", "x", "data.csv", "--foo", "bar", "--nnodes", "9"])
    assert ns.script_args == ["data.csv", "--foo", "bar", "--nnodes", "9"]
    assert ns.nnodes == 1  # after the first value everything belongs to the app


def test_remainder_reaches_the_component() -> None:
    app = materialize_appdef(NEW.trainer, ["--script", "t.py", "--", "--epochs", "3"])
    assert app.roles[0].args == ["t.py", "--epochs", "3", "--lr=0.1", "--debug=False"]


def test_only_the_leading_double_dash_is_dropped() -> None:
    ns = parse_args(NEW.trainer, ["--script", "x", "--", "a", "--", "b"])
    assert ns.script_args == ["a", "--", "b"]


def test_empty_remainder() -> None:
    assert parse_args(NEW.trainer, ["--script", "x", "--"]).script_args == []


def test_typed_varargs_are_converted_and_checked() -> None:
    def total(*numbers: int) -> AppDef:
        """Sums.

        Args:
            numbers: the numbers
        """
        return _echo_app(str(sum(numbers)))

    assert materialize_appdef(total, ["1", "2", "3"]).roles[0].args == ["6"]
    with pytest.raises(ComponentArgsError, match=r"argument \*numbers: invalid int value: 'x'"):
        materialize_appdef(total, ["1", "x"])


# --------------------------------------------------------------------------------------------
# bool flags
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cli", "expected"),
    [
        (["--dry_run"], True),
        (["--dry-run"], True),
        (["--dry_run=true"], True),
        (["--dry_run", "TRUE"], True),
        (["--dry_run", "1"], True),
        (["--dry_run", "Yes"], True),
        (["--dry_run", "false"], False),
        (["--dry_run=False"], False),
        (["--dry_run", "0"], False),
        (["--dry-run", "NO"], False),
    ],
)
def test_bool_forms(cli: list[str], expected: bool) -> None:
    assert parse_args(NEW.flags, cli).dry_run is expected


def test_bool_default_true_can_be_turned_off() -> None:
    assert parse_args(NEW.flags, ["--dry_run"]).verbose is True
    assert parse_args(NEW.flags, ["--dry_run", "--verbose=no"]).verbose is False


def test_bad_bool_value() -> None:
    with pytest.raises(
        ComponentArgsError, match="expected one of true/false/1/0/yes/no, got 'maybe'"
    ):
        parse_args(NEW.flags, ["--dry_run", "maybe"])


def test_bare_flag_before_remainder_needs_double_dash() -> None:
    with pytest.raises(ComponentArgsError, match="put -- before them"):
        parse_args(NEW.trainer, ["--script", "x", "--debug", "data.csv"])
    ns = parse_args(NEW.trainer, ["--script", "x", "--debug", "--", "data.csv"])
    assert ns.debug is True
    assert ns.script_args == ["data.csv"]


# --------------------------------------------------------------------------------------------
# defaults (from a config file)
# --------------------------------------------------------------------------------------------


def test_defaults_override_function_defaults_and_cli_overrides_defaults() -> None:
    defaults = {"nnodes": "4", "debug": "true", "env": "A=b", "mounts": "/m"}
    ns = parse_args(NEW.trainer, ["--script", "s"], defaults=defaults)
    assert (ns.nnodes, ns.debug, ns.env, ns.mounts) == (4, True, {"A": "b"}, ["/m"])
    ns = parse_args(NEW.trainer, ["--script", "s", "--nnodes", "2"], defaults=defaults)
    assert ns.nnodes == 2


def test_defaults_satisfy_required_parameters() -> None:
    app = materialize_appdef(NEW.trainer, [], defaults={"script": "from_config.py"})
    assert app.roles[0].args[0] == "from_config.py"


def test_defaults_accept_dashed_names() -> None:
    assert parse_args(NEW.flags, [], defaults={"dry-run": "yes"}).dry_run is True


def test_defaults_for_varargs_are_split_like_a_shell() -> None:
    ns = parse_args(NEW.trainer, ["--script", "s"], defaults={"script_args": "--a 'b c'"})
    assert ns.script_args == ["--a", "b c"]
    ns = parse_args(NEW.trainer, ["--script", "s", "x"], defaults={"script_args": "--a"})
    assert ns.script_args == ["x"]
    ns = parse_args(NEW.trainer, ["--script", "s"], defaults={"script-args": "--b"})
    assert ns.script_args == ["--b"]


def test_unknown_default_key_is_rejected_with_a_suggestion() -> None:
    with pytest.raises(InvalidSpecError, match="Did you mean 'nnodes'") as info:
        parse_args(NEW.trainer, ["--script", "s"], defaults={"nnode": "2"})
    assert "nnode" in info.value.field


def test_bad_default_value_names_the_key() -> None:
    with pytest.raises(InvalidSpecError, match="invalid int value: 'many'") as info:
        parse_args(NEW.trainer, ["--script", "s"], defaults={"nnodes": "many"})
    assert "nnodes" in info.value.field
    assert not isinstance(info.value, ComponentArgsError)


def test_non_str_default_is_rejected() -> None:
    with pytest.raises(InvalidSpecError, match="must be a str"):
        parse_args(NEW.trainer, ["--script", "s"], defaults={"nnodes": 2})  # type: ignore[dict-item]


# --------------------------------------------------------------------------------------------
# Bad command lines raise ComponentArgsError (never SystemExit)
# --------------------------------------------------------------------------------------------


def _args_error(fn: object, cli: list[str]) -> ComponentArgsError:
    with pytest.raises(ComponentArgsError) as info:
        materialize_appdef(fn, cli)  # type: ignore[arg-type]
    return info.value


def test_unknown_option() -> None:
    err = _args_error(NEW.flags, ["--dry_run", "--bogus", "1"])
    assert isinstance(err, InvalidSpecError)
    assert err.component == "flags"
    assert "unrecognized arguments: --bogus 1" in str(err)
    assert "usage: anylaunch run <run args...> flags" in str(err)
    assert "--dry_run" in err.usage
    assert err.value == ["--dry_run", "--bogus", "1"]


def test_bad_int() -> None:
    err = _args_error(NEW.trainer, ["--script", "s", "--nnodes", "two"])
    assert "argument --nnodes: invalid int value: 'two'" in err.message
    assert "trainer" in str(err)


def test_bad_float_in_a_list() -> None:
    err = _args_error(NEW.flags, ["--dry_run", "--weights", "1,x"])
    assert "argument --weights: invalid float value: 'x'" in err.message


def test_missing_required() -> None:
    err = _args_error(NEW.trainer, [])
    assert "the following arguments are required: --script" in err.message
    assert "usage:" in str(err)


def test_misspelt_option_is_named_even_when_argparse_reports_a_missing_one() -> None:
    err = _args_error(NEW.trainer, ["--scrpt", "s"])
    assert "required: --script" in err.message
    assert "'--scrpt': Did you mean '--script'?" in err.message


def test_prefixes_of_options_are_not_accepted() -> None:
    err = _args_error(NEW.flags, ["--dry"])
    assert "--dry" in err.message


def test_malformed_dict() -> None:
    err = _args_error(NEW.trainer, ["--script", "s", "--env", "novalue"])
    assert "expected KEY=VALUE pairs" in err.message


@NEEDS_DOCSTRINGS
def test_help_prints_and_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(OLD.trainer, ["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "Trains a model with a script." in out
    assert "the training script (required)" in out
    assert "number of nodes (default: 1)" in out
    assert "--dry" not in out


@NEEDS_DOCSTRINGS
def test_help_with_percent_in_docstring(capsys: pytest.CaptureFixture[str]) -> None:
    def pct(share: int = 50) -> AppDef:
        """Uses 100% of the GPU.

        Args:
            share: percent (%) of memory
        """
        return _echo_app()

    with pytest.raises(SystemExit):
        parse_args(pct, ["--help"], defaults={"share": "75"})
    out = capsys.readouterr().out
    assert "Uses 100% of the GPU." in out
    assert "percent (%) of memory (default: 75)" in out


# --------------------------------------------------------------------------------------------
# Signatures
# --------------------------------------------------------------------------------------------


def test_parameter_named_h_and_single_letter_short_option() -> None:
    def comp(h: int, j: str = "1x2") -> AppDef:
        """Has short names.

        Args:
            h: height
            j: job shape
        """
        return _echo_app(str(h), j)

    assert materialize_appdef(comp, ["-h", "3", "-j", "2x4"]).roles[0].args == ["3", "2x4"]
    assert materialize_appdef(comp, ["--h", "3"]).roles[0].args == ["3", "1x2"]


def test_positional_only_and_keyword_only_parameters() -> None:
    def comp(a: str, /, b: int, *rest: str, c: float | None = None) -> AppDef:
        return _echo_app(a, str(b), *rest, str(c))

    app = materialize_appdef(comp, ["--a", "x", "--b", "2", "--c", "1.5", "r1", "r2"])
    assert app.roles[0].args == ["x", "2", "r1", "r2", "1.5"]


def test_unannotated_parameter_is_a_string() -> None:
    def comp(msg, n: int = 1):  # type: ignore[no-untyped-def]
        return _echo_app(msg * n)

    assert materialize_appdef(comp, ["--msg", "ab", "--n", "2"]).roles[0].args == ["abab"]


def test_component_must_return_an_appdef() -> None:
    with pytest.raises(InvalidSpecError, match="must return an AppDef") as info:
        materialize_appdef(NEW.not_an_app, ["--msg", "x"])
    assert info.value.value == "dict"
    assert "not_an_app" in info.value.field


@pytest.mark.parametrize(
    "annotation",
    [set[str], list[list[str]], dict[str, list[str]], list, Optional[set[int]]],
)
def test_unsupported_annotation_is_an_invalid_spec(annotation: object) -> None:
    def comp(x: int) -> AppDef:
        return _echo_app()

    comp.__annotations__["x"] = annotation
    with pytest.raises(InvalidSpecError, match=r"comp\(x\)"):
        parse_args(comp, ["--x", "1"])


def test_kwargs_are_rejected() -> None:
    def comp(**kw: str) -> AppDef:
        return _echo_app()

    with pytest.raises(InvalidSpecError, match=r"\*\*kwargs"):
        parse_args(comp, [])


def test_unresolvable_string_annotation() -> None:
    def comp(x: "NoSuchType") -> AppDef:  # type: ignore[name-defined]  # noqa: F821
        return _echo_app()

    with pytest.raises(InvalidSpecError, match="cannot be resolved"):
        parse_args(comp, [])


@pytest.mark.parametrize(
    ("fn", "cli", "defaults", "field"),
    [
        ("not callable", [], None, "component_fn"),
        (_echo_app, "--msg hi", None, "cli_args"),
        (_echo_app, ["--x", 3], None, "cli_args"),
        (_echo_app, [], ["a=b"], "defaults"),
    ],
)
def test_bad_inputs_name_the_field(fn: object, cli: object, defaults: object, field: str) -> None:
    with pytest.raises(InvalidSpecError) as info:
        materialize_appdef(fn, cli, defaults)  # type: ignore[arg-type]
    assert info.value.field == field


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

_WORD = st.text(st.characters(blacklist_characters=",=", blacklist_categories=("Cs",)), min_size=1)


def _collect(xs: list[int], kv: dict[str, str]) -> AppDef:
    """Collects.

    Args:
        xs: ints
        kv: pairs
    """
    return _echo_app()


@given(
    xs=st.lists(st.integers()),
    kv=st.dictionaries(
        _WORD, st.text(st.characters(blacklist_characters=",", blacklist_categories=("Cs",)))
    ),
)
def test_lists_and_dicts_round_trip(xs: list[int], kv: dict[str, str]) -> None:
    cli = [
        f"--xs={','.join(map(str, xs))}",
        f"--kv={','.join(f'{k}={v}' for k, v in kv.items())}",
    ]
    ns = parse_args(_collect, cli)
    assert ns.xs == xs
    assert ns.kv == kv


def test_error_message_does_not_repeat_argument_values() -> None:
    from anylaunch.specs import AppDef, Role
    from anylaunch.specs.builders import ComponentArgsError, materialize_appdef

    def login(token: str, retries: int = 1) -> AppDef:
        """Logs in.

        Args:
            token: the API token
            retries: how often to retry
        """
        return AppDef("login", roles=[Role("login", image="/tmp", entrypoint="true", args=[token])])

    with pytest.raises(ComponentArgsError) as e:
        materialize_appdef(login, ["--token", "s3cr3t-value", "--retries", "many"])
    assert "s3cr3t-value" not in str(e.value)
    assert "--retries" in str(e.value)
    assert e.value.value == ["--token", "s3cr3t-value", "--retries", "many"]
