"""The ``lsf`` scheduler (public path: :mod:`anylaunch.schedulers.lsf_scheduler`)."""
