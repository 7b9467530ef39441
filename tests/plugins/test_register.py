"""The @register decorators, resource_tags and the fractional helpers (no discovery here)."""

from __future__ import annotations

import itertools
import sys
import textwrap
import types

import pytest

from anylaunch.plugins import (
    HALF,
    QUARTER,
    WHOLE,
    PluginType,
    halve_mem_down_to,
    powers_of_two_gpus,
    register,
    resource_tags,
)
from anylaunch.specs import Resource
from anylaunch.specs.errors import InvalidSpecError

_ids = itertools.count()


def module(src: str) -> types.ModuleType:
    """Executes ``src`` as a fresh module (named resources write into their module)."""
    name = f"_plugin_test_module_{next(_ids)}"
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(textwrap.dedent(src), f"<{name}>", "exec"), mod.__dict__)
    return mod


def test_scheduler_tags_the_function_and_returns_it() -> None:
    def create(session_name: str) -> object:
        return session_name

    assert register.scheduler()(create) is create
    assert create._plugin_type is PluginType.SCHEDULER  # type: ignore[attr-defined]
    assert create._plugin_name == "create"  # type: ignore[attr-defined]
    renamed = register.scheduler(name="other.name")(lambda s: s)
    assert renamed._plugin_name == "other.name"  # type: ignore[attr-defined]
    assert register.tracker()(create)._plugin_type is PluginType.TRACKER  # type: ignore[attr-defined]


def test_component_default_name_is_left_to_discovery() -> None:
    def train() -> None: ...

    register.component()(train)
    assert train._plugin_type is PluginType.COMPONENT  # type: ignore[attr-defined]
    assert train._plugin_name is None  # type: ignore[attr-defined]


def test_decorator_without_parentheses_says_how_to_fix_it() -> None:
    def create(session_name: str) -> object:
        return session_name

    with pytest.raises(InvalidSpecError, match=r"@register.scheduler\(\) with parentheses"):
        register.scheduler(create)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", "has space", "1st", "a/b", 3])
def test_bad_plugin_names_are_rejected(bad: object) -> None:
    with pytest.raises(InvalidSpecError, match=r"register\.scheduler\.name"):
        register.scheduler(name=bad)  # type: ignore[arg-type]


def test_register_rejects_what_is_not_a_function() -> None:
    with pytest.raises(InvalidSpecError, match="can only decorate a function"):
        register.scheduler()(42)  # type: ignore[type-var]
    with pytest.raises(InvalidSpecError, match="must be a PluginType"):
        register("scheduler")  # type: ignore[arg-type]


def test_named_resource_registers_base_aliases_and_slices() -> None:
    mod = module(
        """
        from anylaunch.plugins import WHOLE, powers_of_two_gpus, register
        from anylaunch.specs import Resource

        @register.named_resource(aliases=["box8"], fractionals=powers_of_two_gpus)
        def box(fractional: float = WHOLE) -> Resource:
            return Resource(cpu=int(64 * fractional), gpu=int(8 * fractional),
                            memMB=int(8192 * fractional), capabilities={"rack": "r1"})
        """
    )
    table = mod.NAMED_RESOURCES
    assert sorted(table) == ["box", "box8", "box_1", "box_2", "box_4", "box_8"]
    for name in ("box8", "box_4", "box_8"):
        assert getattr(mod, name) is table[name]  # importable by name too

    base = mod.box()
    assert (base.cpu, base.gpu, base.get_resource_name(), base.is_fractional()) == (
        64,
        8,
        "box",
        False,
    )
    assert mod.box8().get_resource_name() == "box"  # an alias makes the base resource
    half = table["box_4"]()
    assert (half.cpu, half.gpu, half.memMB) == (32, 4, 4096)
    assert half.tags[resource_tags.RESOURCE_NAME] == "box_4"
    assert half.is_fractional() is True
    assert half.capabilities == {"rack": "r1"}
    whole = table["box_8"]()
    assert whole.gpu == 8 and whole.is_fractional() is False  # 1.0 is not a fraction


def test_named_resource_with_dict_fractionals_and_explicit_name() -> None:
    mod = module(
        """
        from anylaunch.plugins import HALF, WHOLE, register
        from anylaunch.specs import Resource

        SHARED = Resource(cpu=8, gpu=0, memMB=1024)

        @register.named_resource(name="cpu_box", fractionals={WHOLE: "full", HALF: "half"})
        def make(fractional: float = WHOLE) -> Resource:
            if fractional == WHOLE:
                return SHARED
            return Resource(cpu=int(8 * fractional), gpu=0, memMB=int(1024 * fractional))
        """
    )
    assert sorted(mod.NAMED_RESOURCES) == ["cpu_box", "cpu_box_full", "cpu_box_half"]
    assert mod.cpu_box_half().cpu == 4
    made = mod.cpu_box()
    made.tags["mine"] = "x"
    assert "mine" not in mod.SHARED.tags  # every caller gets its own copy
    assert mod.SHARED.tags == {}


def test_fractionals_need_a_fractional_parameter() -> None:
    with pytest.raises(InvalidSpecError, match="takes no `fractional` parameter"):
        module(
            """
            from anylaunch.plugins import register, powers_of_two_gpus
            from anylaunch.specs import Resource

            @register.named_resource(fractionals=powers_of_two_gpus)
            def box() -> Resource:
                return Resource(cpu=1, gpu=8, memMB=1)
            """
        )


def test_duplicate_names_in_one_module_are_an_error() -> None:
    with pytest.raises(InvalidSpecError, match="registered twice"):
        module(
            """
            from anylaunch.plugins import register
            from anylaunch.specs import Resource

            @register.named_resource(aliases=["twin"])
            def box() -> Resource:
                return Resource(cpu=1, gpu=0, memMB=1)

            @register.named_resource(name="twin")
            def other() -> Resource:
                return Resource(cpu=2, gpu=0, memMB=1)
            """
        )


def test_bad_named_resource_arguments() -> None:
    with pytest.raises(InvalidSpecError, match="aliases"):
        register.named_resource(aliases="gpu")  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="fractionals"):
        register.named_resource(fractionals=[1.0])  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match="fractions in"):
        module(
            """
            from anylaunch.plugins import register
            from anylaunch.specs import Resource

            @register.named_resource(fractionals={2.0: "double"})
            def box(fractional: float = 1.0) -> Resource:
                return Resource(cpu=1, gpu=0, memMB=1)
            """
        )


def test_a_factory_that_returns_no_resource_fails_when_called() -> None:
    mod = module(
        """
        from anylaunch.plugins import register

        @register.named_resource()
        def box():
            return {"cpu": 1}
        """
    )
    with pytest.raises(InvalidSpecError, match="returned something other than a Resource"):
        mod.box()


def test_fraction_helpers() -> None:
    assert powers_of_two_gpus(Resource(cpu=1, gpu=4, memMB=1)) == {
        WHOLE: "4",
        HALF: "2",
        QUARTER: "1",
    }
    with pytest.raises(ValueError, match="power of two"):
        powers_of_two_gpus(Resource(cpu=1, gpu=0, memMB=1))
    assert halve_mem_down_to(minGiB=3)(Resource(cpu=1, gpu=0, memMB=12 * 1024)) == {
        WHOLE: "12",
        HALF: "6",
        QUARTER: "3",
    }
    with pytest.raises(ValueError, match="use minGiB >= 3"):
        halve_mem_down_to(minGiB=1)(Resource(cpu=1, gpu=0, memMB=12 * 1024))
    with pytest.raises(ValueError, match="whole number of GiB"):
        halve_mem_down_to(minGiB=1)(Resource(cpu=1, gpu=0, memMB=1000))
    with pytest.raises(ValueError, match="minGiB"):
        halve_mem_down_to(minGiB=0)


def test_resource_reads_the_public_tags() -> None:
    r = Resource(
        cpu=1,
        gpu=0,
        memMB=1,
        tags={resource_tags.RESOURCE_NAME: "mine", resource_tags.IS_FRACTIONAL: True},
    )
    assert r.get_resource_name() == "mine"
    assert r.is_fractional() is True
    assert Resource(cpu=1, gpu=0, memMB=1).is_fractional() is False
