"""The ``local_cwd`` scheduler (public path: :mod:`anylaunch.schedulers.local.scheduler`).

Kept empty: the supervisor and the fork-server import this package with ``python -S -E`` on
every app start.
"""
