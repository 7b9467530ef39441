"""The shared list+watch of the Kubernetes schedulers (kubernetes.watch), on the real API
server: it sees apps come, end and go, survives an expired resourceVersion and a broken
connection, and while it is down describes fall back to list calls."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anylaunch.schedulers.kubernetes.client import KubernetesUnreachableError
from anylaunch.schedulers.kubernetes.watch import KubeWatch
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler
from anylaunch.specs import AppDef, AppState, Resource, Role
from tests.schedulers.kubernetes.conftest import CountingClient, _cleanup
from tests.schedulers.kubernetes.kube_cluster import BUSYBOX, wait_for


def sleeper(seconds: int) -> AppDef:
    role = Role(
        "sleeper",
        BUSYBOX,
        entrypoint="sh",
        args=["-c", f"echo started; sleep {seconds}; echo over"],
        resource=Resource(cpu=1, gpu=0, memMB=64),
    )
    return AppDef("watched", [role])


CFG = {"image_pull_policy": "Never", "reserved_millicpu": 990}


@pytest.fixture
def watched(
    counting_client: CountingClient, kube_namespace: str, session_name: str, kubelet: str
) -> Iterator[KubernetesScheduler]:
    """A kubernetes scheduler with its change feed asked for (so its watch runs)."""
    scheduler = KubernetesScheduler(session_name, client=counting_client)
    scheduler.change_feed()
    yield scheduler
    _cleanup(scheduler, kube_namespace, session_name)
    scheduler.close()


def _watch(scheduler: KubernetesScheduler) -> KubeWatch:
    watch = scheduler._watch
    assert watch is not None
    return watch


def _state_after_changes(
    scheduler: KubernetesScheduler, app_id: str, until: Any, timeout: float = 180
) -> Any:
    """Waits on the feed (not on a poll interval) until ``until(describe)`` holds."""
    feed = scheduler.change_feed()

    def check() -> Any:
        desc = scheduler.describe(app_id)
        if until(desc):
            return desc or "gone"
        feed.wait([app_id], 5.0)
        return None

    return wait_for(check, timeout, f"{app_id} to change", interval=0)


def test_the_watch_sees_a_new_app_its_end_and_its_deletion_without_polling(
    watched: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str
) -> None:
    app_id = watched.submit(sleeper(2), {**CFG, "namespace": kube_namespace})
    feed = watched.change_feed()
    # the feed wakes its waiter for the new app's objects
    assert feed.wait([app_id], 60.0) is True
    done = _state_after_changes(watched, app_id, lambda d: d is not None and d.state.is_terminal())
    assert done.state == AppState.SUCCEEDED
    # from the synced cache: a describe (of any number of apps) sends no request
    counting_client.calls.clear()
    assert watched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert watched.describe_many([app_id]) and counting_client.calls == []
    # and the logs are read with one request (the pod is found in the cache)
    assert list(watched.log_iter(app_id, "sleeper", 0)) == ["started\n", "over\n"]
    assert [c.split(" ")[0] for c in counting_client.calls] == ["GET"]
    assert counting_client.calls[0].endswith("/log")
    watched.delete(app_id)
    assert _state_after_changes(watched, app_id, lambda d: d is None) == "gone"


def test_the_watch_survives_an_expired_version_and_a_broken_connection(
    watched: KubernetesScheduler, counting_client: CountingClient, kube_namespace: str
) -> None:
    cfg = {**CFG, "namespace": kube_namespace}
    first = watched.submit(sleeper(1), cfg)
    _state_after_changes(watched, first, lambda d: d is not None and d.state.is_terminal())
    watch = _watch(watched)
    kinds = watch.kind_watches(kube_namespace)
    assert len(kinds) == 3  # records, pods, Jobs
    counting_client.calls.clear()
    for kind in kinds:
        kind.expire()  # as after a 410 Gone: re-list, then watch again
    wait_for(lambda: len(counting_client.calls) >= 6, 60, "the watches to re-list and reconnect")
    wait_for(lambda: all(k.healthy for k in kinds), 60, "the watches to be back")
    for kind in kinds[:1]:
        kind.interrupt()  # a dropped connection: reconnect from the last version
    second = watched.submit(sleeper(1), cfg)
    done = _state_after_changes(watched, second, lambda d: d is not None and d.state.is_terminal())
    assert done.state == AppState.SUCCEEDED
    counting_client.calls.clear()
    many = watched.describe_many([first, second])
    assert [many[a].state for a in (first, second)] == [AppState.SUCCEEDED] * 2  # type: ignore[union-attr]
    assert counting_client.calls == []


class NoWatchClient(CountingClient):
    """A real client whose watch connections always fail (as behind a proxy that drops
    them): lists work, watches never do."""

    def _send(self, method: str, path: str, *args: Any) -> Any:
        if (args[0] or {}).get("watch"):
            raise KubernetesUnreachableError("kubernetes", "watch refused", "none")
        return super()._send(method, path, *args)


def test_while_the_watch_is_down_describes_fall_back_to_list_calls(
    counting_client: CountingClient, kube_namespace: str, session_name: str, kubelet: str
) -> None:
    client = NoWatchClient(counting_client.api_client)
    scheduler = KubernetesScheduler(session_name, client=client)
    feed = scheduler.change_feed()
    try:
        app_id = scheduler.submit(sleeper(1), {**CFG, "namespace": kube_namespace})
        # waiting on the feed starts the watches of the namespace; they keep failing
        feed.wait([app_id], 0.5)
        kinds = _watch(scheduler).kind_watches(kube_namespace)
        wait_for(lambda: all(k.failures for k in kinds), 60, "the watches to fail")
        assert not any(k.healthy for k in kinds)
        # so describes are ordinary list calls (the waiter polls on its interval; the
        # watches' retried lists still wake it for apps whose objects changed)
        client.calls.clear()
        desc = scheduler.describe(app_id)
        assert desc is not None and desc.app_id == app_id
        assert any(c.endswith("/configmaps") for c in client.calls)
        done = _state_after_changes(
            scheduler, app_id, lambda d: d is not None and d.state.is_terminal()
        )
        assert done.state == AppState.SUCCEEDED
    finally:
        _cleanup(scheduler, kube_namespace, session_name)
        scheduler.close()


def test_a_process_reads_its_own_cancel_and_delete_while_the_watch_lags(
    watched: KubernetesScheduler,
    kube_namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache only learns of a write when the watch delivers it; until then the writer's
    own describes go to the API server, so a cancel reads back CANCELLED and a delete None,
    at once. The watches of the kinds that hold records (the ConfigMap a cancel writes, the
    Job that carried the record before) are held back here (their events wait on a gate) to
    make the lag certain rather than a race."""
    app_id = watched.submit(sleeper(300), {**CFG, "namespace": kube_namespace})
    name = app_id.split(":")[1]
    watch = _watch(watched)
    wait_for(
        lambda: (d := watched.describe(app_id)) is not None and d.state == AppState.RUNNING,
        120,
        "the app to run",
    )
    cached, view = watch.record(kube_namespace, name)
    assert cached is True and view is not None  # served from the cache: the Job's record
    assert view.record_kind == ("batch/v1", "Job")
    record_watches = {
        w.kind: w
        for w in watch.kind_watches(kube_namespace)
        if w.kind in (("v1", "ConfigMap"), ("batch/v1", "Job"))
    }
    assert len(record_watches) == 2
    gate = threading.Event()

    def hold_back(kind_watch: Any) -> None:
        apply = kind_watch._apply

        def held_back(kind: str, obj: dict[str, Any]) -> None:
            gate.wait(300)
            apply(kind, obj)

        monkeypatch.setattr(kind_watch, "_apply", held_back)

    for kind_watch in record_watches.values():
        hold_back(kind_watch)
    cached_records = record_watches[("v1", "ConfigMap")].objects
    cached_jobs = record_watches[("batch/v1", "Job")].objects
    try:
        watched.cancel(app_id)
        assert name not in cached_records  # the cancel's ConfigMap has not arrived
        assert f"{name}-sleeper-0" in cached_jobs  # nor the deletion of the Job
        cancelled = watched.describe(app_id)
        assert cancelled is not None and cancelled.state == AppState.CANCELLED
        watched.delete(app_id)
        assert f"{name}-sleeper-0" in cached_jobs  # the cache still has the app
        assert watched.describe(app_id) is None
        assert watch.record(kube_namespace, name) == (False, None)
    finally:
        gate.set()
    # once the watch delivered the deletion, the cache is trusted again
    wait_for(lambda: not watch._writes, 120, "the watch to deliver the writes")
    assert name not in cached_records and f"{name}-sleeper-0" not in cached_jobs
    assert watched.describe(app_id) is None


def test_schedulers_share_a_watch_only_as_the_same_user(
    counting_client: CountingClient, kubelet: str, tmp_path: Path
) -> None:
    """One watch per server, selector and identity: schedulers loaded from the same
    kubeconfig share it, and so do those given the same client; a different client (which
    may carry other credentials) gets its own."""
    from tests.schedulers.kubernetes.kube_cluster import kubeconfig

    # a copy: an identity of this test's own (an earlier test's unclosed scheduler of the
    # provisioned kubeconfig would keep that watch running past this test's closes)
    copy = tmp_path / "kubeconfig"
    copy.write_bytes(Path(kubeconfig()).read_bytes())
    loaded = [KubernetesScheduler("a", kubeconfig=str(copy)) for _ in range(2)]
    given = [KubernetesScheduler("b", client=counting_client) for _ in range(2)]
    other = KubernetesScheduler("c", client=CountingClient(counting_client.api_client))
    try:
        watches = [_watch_of(s) for s in (*loaded, *given, other)]
        assert watches[0] is watches[1]
        assert watches[2] is watches[3]
        assert len({id(w) for w in watches}) == 3
    finally:
        for scheduler in (*loaded, *given, other):
            scheduler.close()
    assert all(w.stopped.is_set() for w in watches)  # the last user stopped each


def _watch_of(scheduler: KubernetesScheduler) -> KubeWatch:
    scheduler.change_feed()
    return _watch(scheduler)
