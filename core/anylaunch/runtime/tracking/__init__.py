"""Small results an app returns to whoever launched it, or to the next app of a workflow
(TorchX's ``torchx.runtime.tracking``).

An app is a program, so it has no return value; a :class:`ResultTracker` gives it one: the
app stores a few numbers or short strings under a key, and any process that knows the
tracker's base (a directory or an fsspec URL, e.g. ``s3://bucket/results``) reads them back.
It is meant for a handful of values (a score, a path), not for data or model weights. For the
metadata, artifacts and lineage of runs, see :mod:`anylaunch.tracker`.

>>> import tempfile
>>> base = tempfile.mkdtemp()
>>> FsspecResultTracker(base)["trainer/attempt_1"] = {"accuracy": 0.9, "model": "s3://m/1"}
>>> FsspecResultTracker(base)["trainer/attempt_1"]["accuracy"]  # e.g. in the next app
0.9
"""

from anylaunch.runtime.tracking.api import FsspecResultTracker, ResultTracker

__all__ = ["FsspecResultTracker", "ResultTracker"]
