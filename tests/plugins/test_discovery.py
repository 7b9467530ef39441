"""Discovery of plugins in the anylaunch_plugins namespace package and in entry points.

Each test runs a fresh interpreter with its own plugin directories on PYTHONPATH: the
registry and the namespace package are process-wide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCHEDULER = """\
from anylaunch.plugins import register

@register.scheduler()
def {name}(session_name: str, **kwargs):
    return ("{name}", session_name)
"""

RESOURCE = """\
from anylaunch.plugins import register
from anylaunch.specs import Resource

@register.named_resource()
def {name}():
    return Resource(cpu={cpu}, gpu=0, memMB=128)
"""

COMPONENT = '''\
import anylaunch.specs as specs
from anylaunch.plugins import register


@register.component({args})
def {name}(msg: str = "{msg}") -> specs.AppDef:
    """Component {name}.

    Args:
        msg: what to echo
    """
    return specs.AppDef(
        name="{name}", roles=[specs.Role(name="r", image=".", entrypoint="echo", args=[msg])]
    )
'''


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def entry_points(root: Path, text: str) -> None:
    info = root / "eps_dist-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: eps-dist\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(text))


def run(code: str, *paths: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "ANYLAUNCH_PLUGINS_SOURCE"}
    full["PYTHONPATH"] = os.pathsep.join([*map(str, paths), *sys.path])
    full.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def out_of(proc: subprocess.CompletedProcess[str]) -> object:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


LIST_SCHEDULERS = """
import json, sys
from anylaunch.schedulers import get_scheduler_factories
names = list(get_scheduler_factories())
backends = [m for m in sys.modules if m.startswith("anylaunch.schedulers.")]
print(json.dumps({"names": names, "backends": backends}))
"""


def test_plugin_schedulers_add_to_the_builtins_without_importing_backends(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/schedulers/alpha.py": SCHEDULER.format(name="alpha"),
            # an implicit namespace sub-package, and a private module that is skipped
            "anylaunch_plugins/schedulers/team/beta.py": SCHEDULER.format(name="beta"),
            "anylaunch_plugins/schedulers/_private.py": SCHEDULER.format(name="hidden"),
        },
    )
    out = out_of(run(LIST_SCHEDULERS, tmp_path))
    assert isinstance(out, dict)
    names = out["names"]
    assert names[0] == "local_cwd"  # still the default
    assert {"kubernetes", "slurm", "aws_batch", "alpha", "beta"} <= set(names)
    assert "hidden" not in names
    assert out["backends"] == []


def test_two_distributions_share_the_namespace(tmp_path: Path) -> None:
    one = write(tmp_path / "one", {"anylaunch_plugins/schedulers/a.py": SCHEDULER.format(name="a")})
    two = write(tmp_path / "two", {"anylaunch_plugins/schedulers/b.py": SCHEDULER.format(name="b")})
    out = out_of(run(LIST_SCHEDULERS, one, two))
    assert isinstance(out, dict)
    assert {"a", "b"} <= set(out["names"])


def test_a_plugin_scheduler_is_created_by_the_registry(tmp_path: Path) -> None:
    write(tmp_path, {"anylaunch_plugins/schedulers/alpha.py": SCHEDULER.format(name="alpha")})
    code = """
    import json
    from anylaunch.schedulers import get_scheduler_factory
    print(json.dumps(get_scheduler_factory("alpha")("sess")))
    """
    assert out_of(run(code, tmp_path)) == ["alpha", "sess"]


def test_a_plugin_named_like_a_builtin_replaces_it_with_a_warning(tmp_path: Path) -> None:
    write(tmp_path, {"anylaunch_plugins/schedulers/mine.py": SCHEDULER.format(name="local_docker")})
    code = """
    import json
    from anylaunch.schedulers import get_scheduler_factories
    get_scheduler_factories()
    f = get_scheduler_factories()  # warned once only
    print(json.dumps([list(f)[:2], f["local_docker"]("s")]))
    """
    proc = run(code, tmp_path)
    assert out_of(proc) == [["local_cwd", "local_docker"], ["local_docker", "s"]]
    assert proc.stderr.count("replaces the built-in scheduler") == 1
    assert "anylaunch_plugins.schedulers.mine" in proc.stderr


def test_broken_plugins_are_reported_and_skipped(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/schedulers/good.py": SCHEDULER.format(name="good"),
            "anylaunch_plugins/schedulers/broken.py": "import no_such_module_for_plugin_tests\n",
            "anylaunch_plugins/schedulers/exits.py": "import sys\nsys.exit(3)\n",
            # a named resource put in the schedulers group
            "anylaunch_plugins/schedulers/misplaced.py": RESOURCE.format(name="res", cpu=1),
        },
    )
    code = """
    import json, yaml
    from anylaunch import plugins
    reg = plugins.registry()
    found = reg.get(plugins.PluginType.SCHEDULER)
    errors = reg.load_errors(plugins.PluginType.SCHEDULER)
    report = yaml.safe_load(str(reg))
    print(json.dumps({
        "found": sorted(found),
        "errors": [[e.module, e.name, e.error] for e in errors],
        "report_errors": report["errors"],
        "report_schedulers": report["scheduler"],
    }))
    """
    proc = run(code, tmp_path)
    out = out_of(proc)
    assert isinstance(out, dict)
    assert out["found"] == ["good"]
    by_module = {m: (n, e) for m, n, e in out["errors"]}
    assert "ModuleNotFoundError" in by_module["anylaunch_plugins.schedulers.broken"][1]
    assert "SystemExit" in by_module["anylaunch_plugins.schedulers.exits"][1]
    name, problem = by_module["anylaunch_plugins.schedulers.misplaced"]
    assert name == "res" and "@register.scheduler()" in problem
    assert "anylaunch_plugins.named_resources" in problem
    assert {"module": "anylaunch_plugins.schedulers.good", "name": "good"} in out[
        "report_schedulers"
    ]
    assert any(e["module"].endswith(".broken") for e in out["report_errors"])
    assert "no_such_module_for_plugin_tests" in proc.stderr  # logged as a warning too


def test_entry_points_stay_as_the_legacy_channel_and_win_a_clash(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/schedulers/ns.py": SCHEDULER.format(name="ns")
            + SCHEDULER.format(name="both"),
            "legacy_mod.py": "def create(session_name, **kw):\n    return ('legacy', session_name)\n",
        },
    )
    entry_points(
        tmp_path, "[anylaunch.schedulers]\nep = legacy_mod:create\nboth = legacy_mod:create\n"
    )
    code = """
    import json
    from anylaunch import plugins
    from anylaunch.schedulers import get_scheduler_factories
    f = get_scheduler_factories()
    errors = plugins.registry().errors
    print(json.dumps({"names": sorted(set(f) & {"ns", "ep", "both"}),
                      "both": f["both"]("s"), "errors": [e.name for e in errors]}))
    """
    out = out_of(run(code, tmp_path))
    assert out == {"names": ["both", "ep", "ns"], "both": ["legacy", "s"], "errors": ["both"]}


def test_plugins_source_env_selects_the_channels(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/schedulers/ns.py": SCHEDULER.format(name="ns"),
            "legacy_mod.py": "def create(session_name, **kw):\n    return None\n",
        },
    )
    entry_points(tmp_path, "[anylaunch.schedulers]\nep = legacy_mod:create\n")
    code = """
    import json
    from anylaunch.schedulers import get_scheduler_factories
    print(json.dumps(sorted(set(get_scheduler_factories()) & {"ns", "ep"})))
    """
    for value, expected in (
        ("", ["ep", "ns"]),
        ("0", []),
        ("1", ["ns"]),
        ("2", ["ep"]),
        ("3", ["ep", "ns"]),
    ):
        proc = run(code, tmp_path, ANYLAUNCH_PLUGINS_SOURCE=value)
        assert out_of(proc) == expected, value
    bad = run(code, tmp_path, ANYLAUNCH_PLUGINS_SOURCE="7")
    assert bad.returncode != 0
    assert "InvalidPluginsSourceError" in bad.stderr
    assert "ANYLAUNCH_PLUGINS_SOURCE='7' is invalid" in bad.stderr and "Fix:" in bad.stderr


def test_bad_plugins_source_is_a_value_error_that_echoes_no_long_value() -> None:
    code = """
    from anylaunch import plugins
    try:
        plugins.registry()
    except ValueError as e:
        print(e)
    """
    proc = run(code, ANYLAUNCH_PLUGINS_SOURCE="ghp_secretlookingtoken1234567890")
    assert proc.returncode == 0, proc.stderr
    assert "<a value of 32 characters>" in proc.stdout
    assert "ghp" not in proc.stdout and "1234" not in proc.stdout


def test_named_resources_from_the_namespace(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/named_resources/site.py": RESOURCE.format(name="site_box", cpu=3)
            + RESOURCE.format(name="cpu_small_override", cpu=5).replace(
                "@register.named_resource()", "@register.named_resource(name='cpu.small')"
            ),
        },
    )
    code = """
    import json
    from anylaunch.specs import named_resources, resource
    r = resource(h="site_box")
    print(json.dumps([r.cpu, r.get_resource_name(), r.is_fractional(),
                      named_resources["cpu.small"].cpu, "gpu.small" in named_resources]))
    """
    proc = run(code, tmp_path)
    assert out_of(proc) == [3, "site_box", False, 5, True]
    assert "'cpu.small'" in proc.stderr and "replaces the built-in" in proc.stderr


def test_components_from_the_namespace(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/components/myteam.py": COMPONENT.format(
                name="train", msg="t", args=""
            )
            + "\n\ndef helper() -> int:\n    return 1\n",
            "anylaunch_plugins/components/group/deep.py": COMPONENT.format(
                name="evaluate", msg="e", args="name='short'"
            ),
            "anylaunch_plugins/components/bad.py": (
                "import anylaunch.specs as specs\nfrom anylaunch.plugins import register\n\n"
                "@register.component()\ndef nodoc(x) -> specs.AppDef:\n    return None\n"
            ),
        },
    )
    code = """
    import json
    from anylaunch.components import ComponentValidationException, get_component, get_components
    found = get_components(include_invalid=True)
    names = sorted(n for n, c in found.items() if not c.fn.__module__.startswith("anylaunch.components"))
    try:
        get_component("bad.nodoc")
        invalid = "accepted"
    except ComponentValidationException as e:
        invalid = str(e)
    print(json.dumps({
        "names": names,
        "train": get_component("myteam.train").fn().roles[0].args,
        "short": get_component("short").description,
        "echo": "utils.echo" in get_components(),
        "invalid": invalid,
    }))
    """
    out = out_of(run(code, tmp_path))
    assert isinstance(out, dict)
    assert out["names"] == ["bad.nodoc", "myteam.train", "short"]
    assert out["train"] == ["t"]
    assert out["short"] == "Component evaluate."
    assert out["echo"] is True
    assert "fails the component linter" in out["invalid"]


def test_clear_finds_plugins_installed_since(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"anylaunch_plugins/components/first.py": COMPONENT.format(name="one", msg="1", args="")},
    )
    code = f"""
    import json, pathlib
    from anylaunch import plugins
    from anylaunch.components import get_components
    from anylaunch.specs import named_resources
    before = "first.one" in get_components(), "late_box" in named_resources
    root = pathlib.Path({str(tmp_path)!r}, "anylaunch_plugins")
    (root / "components" / "second.py").write_text(
        (root / "components" / "first.py").read_text().replace("def one", "def two"))
    (root / "named_resources").mkdir()
    (root / "named_resources" / "late.py").write_text({RESOURCE.format(name="late_box", cpu=2)!r})
    stale = "second.two" in get_components()
    plugins.registry().clear()
    after = "second.two" in get_components(), "late_box" in named_resources
    print(json.dumps([before, stale, after]))
    """
    assert out_of(run(code, tmp_path)) == [[True, False], False, [True, True]]


def test_scheduler_is_reexported_lazily() -> None:
    code = """
    import json, sys
    import anylaunch.schedulers
    lazy = "anylaunch.schedulers.api" not in sys.modules
    from anylaunch.schedulers import Scheduler
    from anylaunch.schedulers.api import Scheduler as Real
    print(json.dumps([lazy, Scheduler is Real]))
    """
    assert out_of(run(code)) == [True, True]


def test_importing_plugins_is_cheap() -> None:
    code = """
    import json, sys
    import anylaunch.plugins
    heavy = [m for m in ("importlib.metadata", "pkgutil", "anylaunch.plugins.plugin_registry",
                         "anylaunch.specs") if m in sys.modules]
    print(json.dumps(heavy))
    """
    assert out_of(run(code)) == []


def test_plugins_source_applies_to_resources_and_components_too(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "anylaunch_plugins/named_resources/site.py": RESOURCE.format(name="ns_box", cpu=3),
            "anylaunch_plugins/components/team.py": COMPONENT.format(name="go", msg="g", args=""),
            "legacy_res.py": (
                "from anylaunch.specs import Resource\n\n"
                "def box():\n    return Resource(cpu=1, gpu=0, memMB=64)\n"
            ),
        },
    )
    entry_points(tmp_path, "[anylaunch.named_resources]\nep_box = legacy_res:box\n")
    code = """
    import json
    from anylaunch.components import get_components
    from anylaunch.specs import named_resources
    print(json.dumps(sorted(
        n for n in ("ns_box", "ep_box") if n in named_resources
    ) + sorted(n for n in get_components() if n.startswith("team."))))
    """
    assert out_of(run(code, tmp_path)) == ["ep_box", "ns_box", "team.go"]
    assert out_of(run(code, tmp_path, ANYLAUNCH_PLUGINS_SOURCE="1")) == ["ns_box", "team.go"]
    assert out_of(run(code, tmp_path, ANYLAUNCH_PLUGINS_SOURCE="2")) == ["ep_box"]
