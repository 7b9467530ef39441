"""The ``kubernetes`` and ``kubernetes_mcad`` schedulers (public paths:
:mod:`anylaunch.schedulers.kubernetes_scheduler`,
:mod:`anylaunch.schedulers.kubernetes_mcad_scheduler`); what both share is in
:mod:`~anylaunch.schedulers.kubernetes.common`."""
