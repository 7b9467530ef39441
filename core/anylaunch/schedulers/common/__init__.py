"""What every backend package of :mod:`anylaunch.schedulers` shares, and nothing else: change
feeds, the shared pool of process-wide watchers, file tailing (with inotify) and copying
(:mod:`~anylaunch.schedulers.common.streams`), app ids and random ids, device mounts of named
devices, the rules every backend applies to roles and replica states, and a base for closeable
objects.

Its modules import only :mod:`anylaunch.specs` and the standard library: they stand below
:mod:`anylaunch.schedulers.api` and every backend package. Kept empty so that the local
scheduler's supervisor, which imports :mod:`~anylaunch.schedulers.common.app_ids` with
``python -S -E``, imports nothing more.
"""
