"""The API clients the Kubernetes schedulers load from a kubeconfig: one per kubeconfig file
(as it is now) and context, shared by every scheduler of the process. Loading needs no
server: the kubeconfigs here point at a port nothing listens on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from anylaunch.schedulers.kubernetes import client as kube_client
from anylaunch.schedulers.kubernetes.client import KubeClient
from anylaunch.schedulers.kubernetes_scheduler import KubernetesScheduler

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "http://127.0.0.1:9"}}
users:
- name: u
  user: {{token: "{token}"}}
contexts:
- name: a
  context: {{cluster: c, user: u}}
- name: b
  context: {{cluster: c, user: u, namespace: other}}
current-context: a
"""


def write(path: Path, token: str) -> str:
    path.write_text(KUBECONFIG.format(token=token))
    return str(path)


def test_schedulers_of_one_kubeconfig_share_one_client_until_the_file_changes(
    tmp_path: Path,
) -> None:
    config = write(tmp_path / "kubeconfig", "first")
    one = KubernetesScheduler("s1", kubeconfig=config).client()
    two = KubernetesScheduler("s2", kubeconfig=config).client()
    assert one.api_client is two.api_client
    pool = one.api_client.rest_client.pool_manager
    assert pool.connection_pool_kw["maxsize"] == kube_client.POOL_MAXSIZE
    # another context of the same file is another client
    other = KubeClient.from_config(config, context="b")
    assert other.api_client is not one.api_client
    assert KubeClient.from_config(config, context="b").api_client is other.api_client

    # the file edited (a new token, a later mtime): loaded anew, the old copy forgotten
    stat = os.stat(config)
    write(tmp_path / "kubeconfig", "second")
    os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    edited = KubernetesScheduler("s3", kubeconfig=config).client()
    assert edited.api_client is not one.api_client
    token = edited.api_client.configuration.api_key["BearerToken"]
    assert token.endswith("second")
    kept = [k for k in kube_client._API_CLIENTS if k[0] == os.path.abspath(config)]
    assert sorted(k[4] for k in kept) == ["", "b"]  # one per context: the edited file's


def test_kubeconfig_from_the_environment_is_read_when_the_client_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = write(tmp_path / "one", "t1")
    second = write(tmp_path / "two", "t2")
    monkeypatch.setenv("KUBECONFIG", first)
    a = KubeClient.from_config()
    monkeypatch.setenv("KUBECONFIG", second)
    b = KubeClient.from_config()
    assert a.api_client is not b.api_client
    assert b.api_client.configuration.api_key["BearerToken"].endswith("t2")
