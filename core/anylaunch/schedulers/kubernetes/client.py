"""A thin JSON-over-REST client for the Kubernetes schedulers, on the official client.

Objects are plain dicts sent as rendered (no client-side model conversion), so the API server
validates exactly what anylaunch would submit and its messages reach the user unchanged. The
official ``kubernetes`` package is imported on first use only (for its kubeconfig loading,
authentication and connection pooling).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from anylaunch.specs.errors import AnylaunchError, BackendUnreachableError, InvalidSpecError

__all__ = [
    "PLURALS",
    "REQUEST_TIMEOUT",
    "KubeClient",
    "KubernetesApiError",
    "KubernetesSchedulerError",
    "KubernetesUnreachableError",
    "KubernetesValidationError",
    "collection_path",
]

#: (connect, read) seconds for ordinary API calls.
REQUEST_TIMEOUT = (10.0, 60.0)

PLURALS: dict[tuple[str, str], str] = {
    ("v1", "Pod"): "pods",
    ("v1", "Service"): "services",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "ServiceAccount"): "serviceaccounts",
    ("batch/v1", "Job"): "jobs",
    ("batch.volcano.sh/v1alpha1", "Job"): "jobs",
    ("mcad.ibm.com/v1beta1", "AppWrapper"): "appwrappers",
    ("scheduling.sigs.k8s.io/v1alpha1", "PodGroup"): "podgroups",
}


class KubernetesSchedulerError(AnylaunchError):
    """The Kubernetes schedulers could not do what was asked (no cluster, API error, ...)."""


class KubernetesUnreachableError(KubernetesSchedulerError, BackendUnreachableError):
    """No cluster is configured, or the API server did not answer.

    >>> str(KubernetesUnreachableError("kubernetes", "no cluster is configured", "set KUBECONFIG"))
    'cannot reach the kubernetes backend: no cluster is configured. Fix: set KUBECONFIG'
    """


class KubernetesApiError(KubernetesSchedulerError):
    """The API server answered an error status; ``message`` is the server's own words."""

    def __init__(self, status: int, reason: str, message: str, action: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"{action} failed: HTTP {status} {reason}: {message}")


class KubernetesValidationError(InvalidSpecError):
    """The API server rejected a rendered object (HTTP 400/422); ``problem`` quotes it."""


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    """The REST path of a namespaced collection.

    >>> collection_path("batch/v1", "Job", "default")
    '/apis/batch/v1/namespaces/default/jobs'
    """
    plural = PLURALS.get((api_version, kind))
    if plural is None:
        raise KubernetesSchedulerError(f"no REST path known for {api_version} {kind}")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    return f"{prefix}/namespaces/{namespace}/{plural}"


#: Loaded API clients by (kubeconfig file as it is now, context). Every scheduler of one
#: kubeconfig shares one client and its connection pool: loading a kubeconfig (a YAML parse,
#: temp files for inline certificates, a TLS context) for each of hundreds of runners was a
#: tenth of a waiting engine's CPU. A client refreshes an expiring exec-plugin or
#: service-account token itself (the loader's ``refresh_api_key_hook``); an edited kubeconfig
#: is another key, so it is loaded anew.
_API_CLIENTS: dict[tuple[str, int, int, int, str], Any] = {}
_API_CLIENTS_LOCK = threading.Lock()
#: Connections each shared client keeps per API server: every following log holds one, and a
#: full pool drops (and warns about) each connection given back to it beyond this.
POOL_MAXSIZE = 256


def _shared_api_client(k8s_config: Any, config_file: str, context: str | None) -> Any:
    """The shared ``ApiClient`` of ``config_file`` as it is now (loaded on first use)."""
    path = os.path.abspath(os.path.expanduser(config_file))
    st = os.stat(path)  # OSError: no such file (the caller falls back to in-cluster)
    key = (path, st.st_ino, st.st_mtime_ns, st.st_size, context or "")
    with _API_CLIENTS_LOCK:
        client = _API_CLIENTS.get(key)
        if client is None:
            from kubernetes import client as k8s_client

            configuration = k8s_client.Configuration()
            configuration.connection_pool_maxsize = POOL_MAXSIZE
            client = k8s_config.new_client_from_config(
                config_file=path, context=context, client_configuration=configuration
            )
            for stale in [k for k in _API_CLIENTS if k[0] == path and k[4] == key[4]]:
                del _API_CLIENTS[stale]  # that file's earlier contents
            _API_CLIENTS[key] = client
        return client


def _status_message(status: int, data: bytes | str | None) -> tuple[str, str]:
    """(reason, message) from an error response body (a metav1.Status, or anything)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else (data or "")
    try:
        body = json.loads(text)
    except ValueError:
        return "", text.strip()[:2000]
    if isinstance(body, dict):
        return str(body.get("reason", "")), str(body.get("message", text)).strip()
    return "", text.strip()[:2000]


class KubeClient:
    """JSON over the Kubernetes REST API through the official client's ``ApiClient``.

    Bodies are plain dicts sent as given (no client-side model conversion), so the API server
    validates exactly what was rendered and its messages reach the user unchanged.
    """

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client

    @classmethod
    def from_config(cls, kubeconfig: str | None = None, context: str | None = None) -> KubeClient:
        """Loads ``kubeconfig`` (default: ``$KUBECONFIG`` or ``~/.kube/config``) or, failing
        that, the in-cluster service account.

        Raises:
            KubernetesSchedulerError: neither is available.
        """
        from anylaunch.sdk import require_sdk

        require_sdk("kubernetes", extra="kubernetes", scheduler="kubernetes")
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config_module

        k8s_config: Any = k8s_config_module  # untyped functions

        # read $KUBECONFIG now: the client's own default was fixed when it was imported
        config_file = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        try:
            return cls(_shared_api_client(k8s_config, config_file, context))
        except (k8s_config.ConfigException, OSError) as e:
            if kubeconfig is not None or context is not None:
                raise KubernetesUnreachableError(
                    "kubernetes",
                    f"cannot load kubeconfig {kubeconfig or '(default)'} (context "
                    f"{context or '(current)'}): {e}",
                    "point KUBECONFIG at a valid kubeconfig",
                ) from e
            first_error = e
        try:
            configuration = k8s_client.Configuration()
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException:
            raise KubernetesUnreachableError(
                "kubernetes",
                f"no Kubernetes cluster is configured ({first_error})",
                "set KUBECONFIG to a kubeconfig file (or run inside a pod with a service account)",
            ) from None
        return cls(k8s_client.ApiClient(configuration))

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: Any,
    ) -> Any:
        """Sends one request; returns the raw urllib3 response (2xx only)."""
        from kubernetes.client.exceptions import ApiException

        headers = {"Accept": "application/json, */*"}
        if body is not None:
            headers["Content-Type"] = content_type
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        api = self.api_client
        action = f"{method} {path}"
        try:
            if hasattr(api, "param_serialize"):  # clients generated by openapi-generator 7
                request = api.param_serialize(
                    method=method,
                    resource_path=path,
                    query_params=params,
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                )
                response = api.call_api(*request, _request_timeout=timeout)
                if not 200 <= response.status <= 299:
                    reason, message = _status_message(response.status, response.read())
                    raise KubernetesApiError(
                        response.status, reason or str(response.reason), message, action
                    )
                return response.response
            return api.call_api(  # older clients: raise ApiException for non-2xx
                path,
                method,
                query_params=params,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=timeout,
            )
        except ApiException as e:
            if not e.status:  # no HTTP answer at all (TLS, connection)
                raise KubernetesUnreachableError(
                    "kubernetes",
                    f"{action}: the API server did not answer ({e.reason})",
                    "check KUBECONFIG",
                ) from e
            reason, message = _status_message(e.status, e.body)
            raise KubernetesApiError(e.status, reason or str(e.reason), message, action) from e
        except OSError as e:  # urllib3 connection errors are OSErrors
            raise KubernetesUnreachableError(
                "kubernetes",
                f"{action}: the API server did not answer ({e})",
                "check that the cluster in KUBECONFIG is up",
            ) from e

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """Sends a request and returns the decoded JSON answer."""
        raw = self._send(method, path, query, body, content_type, REQUEST_TIMEOUT)
        data = raw.data
        return json.loads(data) if data else None

    def stream(self, path: str, query: Mapping[str, Any], read_timeout: float | None = None) -> Any:
        """Starts a streaming GET (e.g. a followed pod log or a watch); returns the urllib3
        response. ``read_timeout``: the longest silence between two chunks (default none)."""
        return self._send("GET", path, query, None, "", (REQUEST_TIMEOUT[0], read_timeout))

    def text(self, path: str, query: Mapping[str, Any]) -> str:
        """A GET whose answer is plain text (e.g. a pod log)."""
        raw = self._send("GET", path, query, None, "", REQUEST_TIMEOUT)
        data: bytes = raw.data
        return data.decode("utf-8", "replace")

    # --- object helpers ---------------------------------------------------------------

    def create(self, obj: Mapping[str, Any], namespace: str, dry_run: bool = False) -> Any:
        """Creates ``obj`` (``dry_run``: validated by the server, not persisted).

        Raises:
            KubernetesValidationError: the server rejected the object (its message quoted).
            KubernetesApiError: any other error status.
        """
        api_version, kind = obj["apiVersion"], obj["kind"]
        name = obj.get("metadata", {}).get("name", "?")
        try:
            return self.request(
                "POST",
                collection_path(api_version, kind, namespace),
                query={"dryRun": "All"} if dry_run else None,
                body=obj,
            )
        except KubernetesApiError as e:
            if e.status in (400, 422):
                raise KubernetesValidationError(
                    f"{kind} {name}",
                    f"{api_version}/{kind}",
                    f"the API server rejected it: {e.message}",
                    "correct the field it names (overlays from set_overlay are applied as "
                    "given), then submit again",
                ) from e
            if e.status == 404:
                raise KubernetesSchedulerError(
                    f"the cluster does not serve {api_version} {kind} in namespace {namespace} "
                    f"({e.message}). Fix: install its CustomResourceDefinition (or create the "
                    "namespace)"
                ) from e
            raise

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Any:
        """The object, or None if it does not exist."""
        try:
            return self.request("GET", f"{collection_path(api_version, kind, namespace)}/{name}")
        except KubernetesApiError as e:
            if e.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: str, selector: str
    ) -> list[dict[str, Any]]:
        """Objects matching a label selector; an unserved kind (no CRD) has none."""
        try:
            answer = self.request(
                "GET",
                collection_path(api_version, kind, namespace),
                query={"labelSelector": selector},
            )
        except KubernetesApiError as e:
            if e.status == 404:
                return []
            raise
        items: list[dict[str, Any]] = answer.get("items") or []
        return items

    def patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Any:
        """JSON merge-patches an object; None if it does not exist."""
        try:
            return self.request(
                "PATCH",
                f"{collection_path(api_version, kind, namespace)}/{name}",
                body=dict(patch),
                content_type="application/merge-patch+json",
            )
        except KubernetesApiError as e:
            if e.status == 404:
                return None
            raise

    def delete(
        self, api_version: str, kind: str, namespace: str, name: str, propagation: str
    ) -> bool:
        """Deletes an object with a propagation policy; False if it did not exist."""
        try:
            self.request(
                "DELETE",
                f"{collection_path(api_version, kind, namespace)}/{name}",
                body={"propagationPolicy": propagation},
            )
        except KubernetesApiError as e:
            if e.status == 404:
                return False
            raise
        return True
