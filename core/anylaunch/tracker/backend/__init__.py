"""Tracker backends shipped with anylaunch: :mod:`anylaunch.tracker.backend.fsspec`."""
