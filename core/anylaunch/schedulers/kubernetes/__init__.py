"""The ``kubernetes`` and ``kubernetes_mcad`` schedulers (TorchX's module paths:
:mod:`anylaunch.schedulers.kubernetes_scheduler` and
:mod:`anylaunch.schedulers.kubernetes_mcad_scheduler`).

- :mod:`~anylaunch.schedulers.kubernetes.scheduler`: the ``kubernetes`` scheduler (Jobs, or a
  Volcano Job).
- :mod:`~anylaunch.schedulers.kubernetes.mcad`: the ``kubernetes_mcad`` scheduler (an MCAD
  AppWrapper).
- :mod:`~anylaunch.schedulers.kubernetes.common`: what both share,
  :class:`~anylaunch.schedulers.kubernetes.common.KubernetesSchedulerBase`.
- :mod:`~anylaunch.schedulers.kubernetes.names`: names, labels and the shared run options.
  Every object of an app carries ``anylaunch.io/app-id`` (and role/replica labels), so one list
  call by label selector serves a whole app (or many apps).
- :mod:`~anylaunch.schedulers.kubernetes.pods`: a Role as a pod (resources, env with field
  refs, mounts, ``/dev/shm``, ports, node selector, service account, priority class, pull
  policy) and overlays with a blocklist.
- :mod:`~anylaunch.schedulers.kubernetes.request`: the request (objects, masked printing), the
  replicas' pods and the headless Service.
- :mod:`~anylaunch.schedulers.kubernetes.record`: the app *record*, what ``describe`` needs to
  rebuild the roles (secret values masked): an annotation of the app's rank-0 Job in ``jobs``
  mode, else a ConfigMap named after the app. A cancel writes it (with the cancellation mark)
  to that ConfigMap before it deletes the workload, so a cancelled app still describes as
  CANCELLED until it is deleted.
- :mod:`~anylaunch.schedulers.kubernetes.state`: pod status → replica state, pending reasons,
  exit codes, the app's state and description.
- :mod:`~anylaunch.schedulers.kubernetes.queries`: the bounded list calls behind describe and
  list, and the wait for the rank-0 pod's IP.
- :mod:`~anylaunch.schedulers.kubernetes.logs`: pod logs, read or followed.
- :mod:`~anylaunch.schedulers.kubernetes.capacity`: whether the cluster can run the app's pods
  now (ResourceQuotas, then the nodes' free requests: three list calls).
- :mod:`~anylaunch.schedulers.kubernetes.client`: the REST client (plain dict objects,
  validated by the API server as sent); the ``kubernetes`` SDK is imported on first use.
- :mod:`~anylaunch.schedulers.kubernetes.watch`: the process-wide list+watch of a scheduler's
  objects, behind the change feed and cached describes.
"""
