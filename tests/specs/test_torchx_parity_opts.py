"""TorchX parity of StructuredOpts (the read-only mapping contract) and the specs odds and ends:
``cases``, ``get_type_name``, ``ANYLAUNCH_HOME``, ``AppDryRunInfo.app``/``.cfg``, ``runopts | runopts``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from anylaunch.specs import cases
from anylaunch.specs.api import AppDef, AppDryRunInfo, Role
from anylaunch.specs.errors import InvalidRunConfigException, InvalidSpecError
from anylaunch.specs.home import ANYLAUNCH_HOME
from anylaunch.specs.runopts import get_type_name, runopts
from anylaunch.specs.structured_opts import StructuredOpts


@dataclass
class K8sOpts(StructuredOpts):
    context: str = "default"
    """Kubernetes context to submit to."""

    service_account: Optional[str] = None
    """Service account the pods run as."""


@dataclass
class SlurmLikeOpts(StructuredOpts):
    partition: str
    """Partition to submit to."""

    mail_user: Optional[str] = field(default=None, metadata={"cfg_key": "mail-user"})
    """Who gets the job's mails."""

    num_retries: int = 3
    tags: list[str] = field(default_factory=list)
    k8s: K8sOpts = field(default_factory=K8sOpts)
    """Not read: a nested field's own docstring is not an option's."""


@dataclass
class Required(StructuredOpts):
    token_file: str
    """Path of the token file."""

    region: str = "eu"


@dataclass
class WithGroups(StructuredOpts):
    name: str = "job"
    k8s: Optional[K8sOpts] = None
    """Kubernetes settings; unset unless one of them is given."""

    auth: Required | None = None


# --- the read-only mapping --------------------------------------------------------------------


def test_opts_are_a_read_only_mapping_keyed_by_cfg_keys() -> None:
    opts = SlurmLikeOpts(partition="gpu", mail_user="me@x", tags=["a"])
    assert isinstance(opts, Mapping)
    keys = ["partition", "mail-user", "num_retries", "tags", "k8s.context", "k8s.service_account"]
    assert list(opts) == keys
    assert len(opts) == len(keys)
    assert dict(opts) == {
        "partition": "gpu",
        "mail-user": "me@x",
        "num_retries": 3,
        "tags": ["a"],
        "k8s.context": "default",
        "k8s.service_account": None,
    }
    assert list(opts.keys()) == keys
    with pytest.raises(TypeError):
        opts["partition"] = "cpu"  # type: ignore[index]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("partition", "gpu"),
        ("numRetries", 3),
        ("num_retries", 3),
        ("mail-user", "me@x"),  # the cfg_key
        ("mail_user", "me@x"),  # the field name of a renamed option
        ("mailUser", "me@x"),  # and its camelCase
        ("k8s.context", "default"),
        ("k8s.serviceAccount", None),
        ("k8s", K8sOpts()),  # a nested field by name gives the nested opts
    ],
)
def test_indexing_get_and_in_accept_every_spelling(key: str, value: object) -> None:
    opts = SlurmLikeOpts(partition="gpu", mail_user="me@x")
    assert opts[key] == value
    assert opts.get(key, "absent") == value
    assert key in opts


@pytest.mark.parametrize("key", ["nope", "k8s.nope", "partition.x", "get", "to_cfg", "k8s.get", ""])
def test_unknown_keys_and_method_names_are_key_errors(key: str) -> None:
    opts = SlurmLikeOpts(partition="gpu")
    with pytest.raises(KeyError):
        opts[key]
    assert key not in opts
    assert opts.get(key) is None
    assert opts.get(key, 7) == 7


def test_non_string_keys_are_not_in_the_mapping() -> None:
    opts = SlurmLikeOpts(partition="gpu")
    assert 1 not in opts
    with pytest.raises(KeyError):
        opts[1]  # type: ignore[index]


# --- cfg_key --------------------------------------------------------------------------------


def test_cfg_key_names_the_option_and_the_field_name_is_an_alias() -> None:
    schema = SlurmLikeOpts.as_runopts()
    assert [name for name, _ in schema][:2] == ["partition", "mail-user"]
    for spelling in ("mail-user", "mail_user", "mailUser"):
        assert SlurmLikeOpts.from_cfg({"partition": "p", spelling: "a@b"}).mail_user == "a@b"
        assert schema.resolve({"partition": "p", spelling: "a@b"})["mail-user"] == "a@b"
    assert schema.cfg_from_str("mail_user=a@b,partition=p") == {
        "mail-user": "a@b",
        "partition": "p",
    }
    assert SlurmLikeOpts(partition="p", mail_user="a@b").to_cfg()["mail-user"] == "a@b"


@pytest.mark.parametrize(
    "cfg_key", ["", " ", "a.b", 3], ids=["empty", "blank", "dotted", "not-a-str"]
)
def test_a_cfg_key_that_cannot_name_an_option_is_a_type_error(cfg_key: object) -> None:
    bad = dataclass(
        type(
            "BadKey",
            (StructuredOpts,),
            {
                "__annotations__": {"x": "str"},
                "x": field(default="", metadata={"cfg_key": cfg_key}),
            },
        )
    )
    with pytest.raises(TypeError, match=r"BadKey\.x.*cfg_key"):
        bad.as_runopts()


def test_two_fields_declaring_one_option_is_a_type_error() -> None:
    clash = dataclass(
        type(
            "Clash",
            (StructuredOpts,),
            {
                "__annotations__": {"a": "str", "b": "str"},
                "a": "",
                "b": field(default="", metadata={"cfg_key": "a"}),
            },
        )
    )
    with pytest.raises(TypeError, match=r"Clash\.b.*'a' is already declared"):
        clash.as_runopts()


# --- from_cfg: which spelling wins --------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        {"partition": "p", "num_retries": 1, "numRetries": 2},
        {"partition": "p", "numRetries": 2, "num_retries": 1},
    ],
    ids=["snake-first", "camel-first"],
)
def test_snake_case_beats_its_camel_case_twin_in_any_order(cfg: dict[str, object]) -> None:
    assert SlurmLikeOpts.from_cfg(cfg).num_retries == 1  # type: ignore[arg-type]
    assert SlurmLikeOpts.as_runopts().resolve(cfg)["num_retries"] == 1  # type: ignore[arg-type]


def test_cfg_key_beats_field_name_beats_camel_case() -> None:
    spellings = [("mailUser", "camel"), ("mail_user", "field"), ("mail-user", "key")]
    for n in range(len(spellings)):
        order = spellings[n:] + spellings[:n]  # every rotation: the order of keys never matters
        cfg = {"partition": "p", **dict(order)}
        assert SlurmLikeOpts.from_cfg(cfg).mail_user == "key"
    assert (
        SlurmLikeOpts.from_cfg({"partition": "p", "mailUser": "c", "mail_user": "f"}).mail_user
        == "f"
    )


def test_a_losing_spelling_is_not_cast() -> None:
    opts = SlurmLikeOpts.from_cfg({"partition": "p", "numRetries": "many", "num_retries": "4"})
    assert opts.num_retries == 4


def test_plain_runopts_exact_name_beats_camel_case() -> None:
    schema = runopts()
    schema.add("cluster_id", type_=str, help="cluster")
    assert schema.resolve({"clusterId": "b", "cluster_id": "a"}) == {"cluster_id": "a"}
    assert schema.resolve({"clusterID": "c"}) == {"cluster_id": "c"}  # TorchX's camel_to_snake


# --- | -------------------------------------------------------------------------------------


def test_or_merges_into_a_flat_dict_right_side_wins() -> None:
    left = SlurmLikeOpts(partition="gpu", tags=["t"])
    right = WithGroups(name="n", k8s=K8sOpts(context="prod"))
    merged = left | right
    assert type(merged) is dict
    assert merged == {
        "partition": "gpu",
        "mail-user": None,
        "num_retries": 3,
        "tags": ["t"],
        "k8s.context": "prod",  # from the right
        "k8s.service_account": None,
        "name": "n",
    }
    merged["tags"].append("u")  # type: ignore[union-attr]
    assert left.tags == ["t"]  # the merge holds copies
    assert (left | {"partition": "cpu"})["partition"] == "cpu"
    assert ({"partition": "cpu", "extra": 1} | left)["partition"] == "gpu"
    with pytest.raises(TypeError):
        left | 3  # type: ignore[operator]


# --- get_docstrings ---------------------------------------------------------------------------


def test_get_docstrings_by_field_name_with_nested_keys() -> None:
    assert SlurmLikeOpts.get_docstrings() == {
        "partition": "Partition to submit to.",
        "mail_user": "Who gets the job's mails.",
        "k8s.context": "Kubernetes context to submit to.",
        "k8s.service_account": "Service account the pods run as.",
    }
    assert WithGroups.get_docstrings() == {
        "k8s.context": "Kubernetes context to submit to.",
        "k8s.service_account": "Service account the pods run as.",
        "auth.token_file": "Path of the token file.",
    }


# --- optional groups --------------------------------------------------------------------------


def test_optional_group_options_are_declared_without_defaults() -> None:
    schema = dict(WithGroups.as_runopts())
    assert list(schema) == [
        "name",
        "k8s.context",
        "k8s.service_account",
        "auth.token_file",
        "auth.region",
    ]
    for key in list(schema)[1:]:
        assert (schema[key].is_required, schema[key].default) == (False, None), key


def test_optional_groups_left_unset_are_none_and_skipped() -> None:
    opts = WithGroups.from_cfg({})
    assert (opts.k8s, opts.auth) == (None, None)
    assert list(opts) == ["name"] and len(opts) == 1
    assert "k8s.context" not in opts and opts.get("k8s.context", "unset") == "unset"
    assert opts["k8s"] is None
    assert opts.to_cfg() == {"name": "job"}
    # a cfg already resolved by the scheduler's runopts (every key present, None) is the same
    assert WithGroups.from_cfg(WithGroups.as_runopts().resolve({})) == opts


def test_one_option_of_a_group_sets_the_group_with_its_defaults() -> None:
    opts = WithGroups.from_cfg({"k8s.serviceAccount": "sa"})
    assert opts.k8s == K8sOpts(context="default", service_account="sa")
    assert opts["k8s.context"] == "default"
    assert list(opts) == ["name", "k8s.context", "k8s.service_account"]
    assert WithGroups.from_cfg(opts.to_cfg()) == opts
    assert WithGroups.from_cfg({"auth.token_file": "/t"}).auth == Required("/t", "eu")


def test_a_required_option_of_a_group_in_use_must_be_given() -> None:
    with pytest.raises(InvalidRunConfigException) as info:
        WithGroups.from_cfg({"auth.region": "us"})
    assert info.value.field == "auth.token_file"
    assert "auth.*" in str(info.value)


def test_underscored_fields_are_private_not_options() -> None:
    @dataclass
    class WithPrivate(StructuredOpts):
        queue: str = "q"
        _cache: dict[str, str] = field(default_factory=dict)

    assert [name for name, _ in WithPrivate.as_runopts()] == ["queue"]
    opts = WithPrivate.from_cfg({"queue": "gpu"})
    assert list(opts) == ["queue"] and "_cache" not in opts
    with pytest.raises(InvalidRunConfigException, match="unknown run option"):
        WithPrivate.from_cfg({"_cache": {}})


# --- odds and ends ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("snake", "camel"),
    [("cluster_name", "clusterName"), ("hpc_cluster_uuid", "hpcClusterUuid"), ("name", "name")],
)
def test_cases_convert_both_ways(snake: str, camel: str) -> None:
    assert cases.snake_to_camel(snake) == camel
    assert cases.camel_to_snake(camel) == snake


def test_camel_to_snake_keeps_acronyms_together() -> None:
    assert cases.camel_to_snake("clusterID") == "cluster_id"
    assert cases.camel_to_snake("k8sContext") == "k8s_context"


@pytest.mark.parametrize(
    ("tp", "name"),
    [(str, "str"), (int, "int"), (list[str], "list[str]"), (dict[str, str], "dict[str, str]")],
)
def test_get_type_name(tp: object, name: str) -> None:
    assert get_type_name(tp) == name


def test_anylaunch_home_defaults_to_dot_anylaunch_in_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for unset in (None, ""):  # an empty value counts as unset
        if unset is None:
            monkeypatch.delenv("ANYLAUNCH_HOME", raising=False)
        else:
            monkeypatch.setenv("ANYLAUNCH_HOME", unset)
        assert ANYLAUNCH_HOME() == tmp_path / ".anylaunch"
    assert (tmp_path / ".anylaunch").is_dir()
    out = ANYLAUNCH_HOME("conda-pack-out")
    assert out == tmp_path / ".anylaunch" / "conda-pack-out" and out.is_dir()


def test_anylaunch_home_env_var_moves_it_and_subdirs_are_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "custom"))
    out = ANYLAUNCH_HOME("a", "b/c")
    assert out == tmp_path / "custom" / "a" / "b" / "c" and out.is_dir()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("ANYLAUNCH_HOME", "~/tilde")
    assert ANYLAUNCH_HOME() == tmp_path / "tilde"


@pytest.mark.parametrize("sub", ["/etc", "../up", "a/../../b", 3])
def test_anylaunch_home_rejects_subdirs_outside_it(
    sub: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANYLAUNCH_HOME", str(tmp_path / "h"))
    with pytest.raises(InvalidSpecError, match="relative path") as info:
        ANYLAUNCH_HOME(sub)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)
    assert not (tmp_path / "h").exists()


def test_dryrun_info_app_and_cfg_are_read_only_and_empty_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = AppDryRunInfo({"cmd": "x"}, repr)
    assert info.app is None and dict(info.cfg) == {}
    with pytest.raises(AttributeError):
        info.app = AppDef("x")  # type: ignore[misc]

    from anylaunch.schedulers.local import state as local_state
    from anylaunch.schedulers.local_scheduler import create_scheduler

    monkeypatch.setenv(local_state.STATE_DIR_ENV, str(tmp_path / "state"))
    app = AppDef("x", roles=[Role("w", image=str(tmp_path), entrypoint="true")])
    info = create_scheduler("parity").submit_dryrun(app, {"prependCwd": True})
    assert info.app is app
    assert info.cfg["prepend_cwd"] is True and info.cfg["log_dir"] is None
    with pytest.raises(TypeError):
        info.cfg["prepend_cwd"] = False  # type: ignore[index]
    assert info.cfg["prepend_cwd"] is True


def test_runopts_or_merges_into_a_new_runopts_right_side_wins() -> None:
    first, second = runopts(), runopts()
    first.add("foo", type_=str, default="a", help="first foo")
    first.add("only_first", type_=int, default=1, help="x")
    second.add("foo", type_=str, default="b", help="second foo")
    merged = first | second
    assert [name for name, _ in merged] == ["foo", "only_first"]
    foo = merged.get("foo")
    assert foo is not None and (foo.default, foo.help) == ("b", "second foo")
    assert len(first) == 2 and len(second) == 1  # untouched
    assert "mail_user" in (second | SlurmLikeOpts.as_runopts())  # aliases carry over
    with pytest.raises(TypeError):
        first | {"foo": 1}  # type: ignore[operator]


def test_torchx_home_variable_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ANYLAUNCH_HOME", raising=False)
    monkeypatch.setenv("TORCHX_HOME", str(tmp_path / "torchx"))
    assert ANYLAUNCH_HOME() == tmp_path / ".anylaunch"
    assert not (tmp_path / "torchx").exists()
