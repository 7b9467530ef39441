"""SharedPool: the one process-wide sharing of backend watchers (Kubernetes, Docker)."""

from __future__ import annotations

import os
import threading

from anylaunch.schedulers.common.pool import SharedPool


class Watcher:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_racing_makers_share_one_and_the_extra_is_discarded() -> None:
    pool: SharedPool[str, Watcher] = SharedPool()
    both_making = threading.Barrier(2)
    made: list[Watcher] = []

    def make() -> Watcher:
        both_making.wait(timeout=60)  # both threads are past the first look: a real race
        made.append(Watcher())
        return made[-1]

    got: list[Watcher] = []
    threads = [
        threading.Thread(target=lambda: got.append(pool.acquire("k", make, discard=Watcher.close)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(made) == 2 and got[0] is got[1]
    assert [w.closed for w in made].count(True) == 1  # the loser's was discarded
    assert pool.users(got[0]) == 2


def test_an_unusable_one_is_replaced_and_a_forgotten_one_is_not_handed_out() -> None:
    pool: SharedPool[str, Watcher] = SharedPool()
    first = pool.acquire("k", Watcher, usable=lambda w: not w.closed)
    first.close()
    second = pool.acquire("k", Watcher, usable=lambda w: not w.closed)
    assert second is not first and pool.users(second) == 1
    pool.forget(second)
    assert pool.acquire("k", Watcher) is not second
    pool.release(second, Watcher.close)  # no longer pooled: closed at once
    assert second.closed


def test_a_forked_child_starts_with_an_empty_pool() -> None:
    pool: SharedPool[str, Watcher] = SharedPool()
    pool.acquire("k", Watcher)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's watcher threads did not survive the fork
        os.write(write, b"%d" % len(pool._items))
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 16) == b"0"
    os.close(read)
    assert len(pool._items) == 1  # the parent's is untouched
