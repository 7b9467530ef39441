"""anylaunch.schedulers.ids, .streams and .devices: TorchX's helper modules, over common/."""

from __future__ import annotations

import io
import os
import random
import re
import threading
import time
import unittest.mock
import warnings
from pathlib import Path

import pytest

from anylaunch.schedulers import devices, ids, streams
from anylaunch.schedulers.common import app_ids
from anylaunch.specs import DeviceMount
from anylaunch.specs.named_resources_aws import EFA_DEVICE, NEURON_DEVICE, aws_p4d_24xlarge

# --- ids ---------------------------------------------------------------------------------------

K8S_NAME = re.compile(r"^[a-z][a-z0-9]*$")


def test_random_ids_are_kubernetes_names_and_differ() -> None:
    got = [ids.random_id() for _ in range(2000)]
    assert all(K8S_NAME.match(i) for i in got)
    assert len(set(got)) == len(got)
    assert max(len(i) for i in got) == 13


def test_random_seed_does_not_repeat_ids() -> None:
    random.seed(7)
    first = ids.random_id()
    random.seed(7)
    assert ids.random_id() != first


@pytest.mark.parametrize("max_length", [1, 2, 5, 13])
def test_max_length_caps_the_id(max_length: int) -> None:
    assert all(len(ids.random_id(max_length)) <= max_length for _ in range(200))
    assert ids.random_id(max_length)[0].isalpha()


@pytest.mark.parametrize("max_length", [0, -3])
def test_non_positive_max_length_is_empty(max_length: int) -> None:
    assert ids.random_id(max_length) == ""


def test_random_uint64_spans_64_bits() -> None:
    values = [ids.random_uint64() for _ in range(200)]
    assert all(0 <= v < 2**64 for v in values)
    assert max(values) > 2**63 // 2  # not 32-bit numbers


def test_make_unique() -> None:
    a, b = ids.make_unique("trainer"), ids.make_unique("trainer")
    assert a != b and a.startswith("trainer-") and K8S_NAME.match(a.removeprefix("trainer-"))
    short = ids.make_unique("trainer", 4)
    assert short.startswith("trainer-") and len(short) == len("trainer-") + 4


def test_app_ids_keep_their_format_and_share_the_random_source() -> None:
    assert ids.random_uint64 is app_ids.random_uint64
    app_id = app_ids.make_app_id("my train")
    assert re.fullmatch(r"my-train-[a-z0-9]{8}", app_id)
    # random_suffix spells the digits of one random_uint64, least significant first
    with unittest.mock.patch.object(app_ids, "random_uint64", return_value=36 + 2):
        assert app_ids.random_suffix(3) == "cba"


# --- streams -----------------------------------------------------------------------------------


class Collected(io.BytesIO):
    """Keeps what was written after close."""

    value = b""

    def close(self) -> None:
        self.value = self.getvalue()
        super().close()


def wait_for(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_tee_copies_files_while_they_grow(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"a1\n")
    b.write_bytes(b"")
    out = Collected()
    tee = streams.Tee(out, str(a), str(b))
    try:
        wait_for(lambda: b"a1\n" in out.getvalue())
        with open(b, "ab") as f:
            f.write(b"b1\n")
        wait_for(lambda: b"b1\n" in out.getvalue())
        assert tee.write(b"direct\n") == 7
    finally:
        with open(a, "ab") as f:
            f.write(b"a2\n")  # written before close: close drains it
        tee.close()
    assert sorted(out.value.splitlines()) == [b"a1", b"a2", b"b1", b"direct"]
    assert out.closed
    tee.close()  # twice is fine


def test_tee_reads_a_named_pipe_without_blocking_on_it(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = Collected()
    with streams.Tee(out, str(fifo)):  # no writer yet: does not block
        with open(fifo, "wb") as w:
            w.write(b"through the pipe\n")
        wait_for(lambda: out.getvalue() == b"through the pipe\n")
    assert out.value == b"through the pipe\n"


def test_tee_needs_a_source_and_existing_paths(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one source"):
        streams.Tee(Collected())
    with pytest.raises(FileNotFoundError):
        streams.Tee(Collected(), str(tmp_path / "ok"), str(tmp_path / "missing"))


def test_tee_close_raises_the_error_that_stopped_the_copy(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(b"data")

    class Broken(Collected):
        def write(self, data: object) -> int:
            raise OSError("disk full")

    tee = streams.Tee(Broken(), str(src))
    with pytest.raises(OSError, match="disk full"):
        tee.close()


def test_tee_writes_from_threads_do_not_interleave(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(b"")
    out = Collected()
    with streams.Tee(out, str(src)) as tee:
        chunk = b"x" * 1000 + b"\n"
        threads = [threading.Thread(target=lambda: [tee.write(chunk) for _ in range(50)])]
        threads += [threading.Thread(target=lambda: [tee.write(chunk) for _ in range(50)])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out.value.splitlines() == [chunk.strip()] * 100


# --- devices -----------------------------------------------------------------------------------


def test_to_devicemounts() -> None:
    assert devices.to_devicemounts(2, "/dev/x") == [
        DeviceMount("/dev/x0", "/dev/x0"),
        DeviceMount("/dev/x1", "/dev/x1"),
    ]
    assert devices.to_devicemounts(0, "/dev/x") == []


def test_devices_map_efa_and_neuron() -> None:
    assert set(devices.DEVICES) == {EFA_DEVICE, NEURON_DEVICE}
    assert devices.DEVICES[EFA_DEVICE](1) == [
        DeviceMount("/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0")
    ]
    assert devices.DEVICES[NEURON_DEVICE](1) == [DeviceMount("/dev/neuron0", "/dev/neuron0")]


def test_get_device_mounts_of_a_named_resource() -> None:
    resource = aws_p4d_24xlarge()
    mounts = devices.get_device_mounts(resource.devices)
    assert len(mounts) == resource.devices[EFA_DEVICE] > 0
    assert mounts[-1].src_path == f"/dev/infiniband/uverbs{len(mounts) - 1}"


def test_get_device_mounts_warns_about_an_unknown_device() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = devices.get_device_mounts({"example.com/fpga": 2, NEURON_DEVICE: 1})
    assert got == [DeviceMount("/dev/neuron0", "/dev/neuron0")]
    assert [str(w.message).split(" (")[0] for w in caught] == [
        "unknown named device 'example.com/fpga'"
    ]


def test_device_mounts_match_what_aws_batch_mounts() -> None:
    from anylaunch.schedulers.aws.batch_request import device_mounts
    from anylaunch.specs import Resource, Role

    role = Role("w", "img", resource=Resource(1, 0, 64, devices={EFA_DEVICE: 2, NEURON_DEVICE: 1}))
    assert device_mounts(role) == devices.get_device_mounts(role.resource.devices)
