"""The ``local_docker`` scheduler (public path: :mod:`anylaunch.schedulers.docker_scheduler`)."""
