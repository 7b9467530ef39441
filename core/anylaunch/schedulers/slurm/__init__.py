"""The ``slurm`` scheduler (public path: :mod:`anylaunch.schedulers.slurm_scheduler`)."""
