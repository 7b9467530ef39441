"""The lifecycle scenario matrix: the same apps and faults run through every engine (Airflow
sync and deferred, Prefect, Dagster), each asserting the same final app state and the same
kind of engine outcome, as the behaviour table in docs/lifecycle.md prescribes.

- :mod:`.faulty_local`: the fault seam, a scheduler plugin (local_cwd whose status calls fail
  on cue), registered through an ``anylaunch.schedulers`` entry point.
- :mod:`.scenarios`: the rows (success, non-zero exit, startup timeout on a job Slurm really
  holds, run timeout, status errors then recovery, the status API gone for good, the app
  deleted underneath) with their expected cells.
- :mod:`.matrix`: what the engines' tests share (plugin registration, faults, the deleter
  thread, the checks).
"""
