"""Named resources are discovered lazily, as TorchX's ``specs.named_resources`` is: importing
``anylaunch.specs`` reads no entry point; the first lookup does, once."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = r"""
import importlib.metadata as md
import json

groups = []
real = md.entry_points


def counting(*args, **kwargs):
    groups.append(kwargs.get("group") or (args[0] if args else None))
    return real(*args, **kwargs)


md.entry_points = counting

import anylaunch.specs as specs
import anylaunch.specs.named_resources_aws
import anylaunch.specs.named_resources_generic
import anylaunch.specs.resources

after_import = list(groups)
table = specs.named_resources
after_attribute = list(groups)
first = table["aws_p3.2xlarge"]
after_first = list(groups)
"aws_t3.medium" in table
len(table)
sorted(table)[:1]
second = table["aws_p3.2xlarge"]
print(json.dumps({
    "after_import": after_import,
    "after_attribute": after_attribute,
    "after_first": after_first,
    "after_more": list(groups),
    "fresh": first is not second and first == second,
}))
"""


def test_import_reads_no_entry_point_and_the_first_lookup_reads_them_once() -> None:
    # a fresh interpreter: this process has long since built its table
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["after_import"] == []
    assert seen["after_attribute"] == []  # reading the mapping is not a lookup yet
    assert "anylaunch.named_resource_sources" in seen["after_first"]
    assert seen["after_more"] == seen["after_first"]  # membership, len, iteration: no rescan
    assert seen["fresh"]  # each lookup makes a new Resource, as TorchX's factories do
