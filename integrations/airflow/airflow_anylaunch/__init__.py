"""anylaunch for Airflow (2.10+ and 3.x): launch, watch, stream logs from and cancel anylaunch apps.

Modules (import what you use; this package imports nothing):

- :mod:`airflow_anylaunch.operators`: ``AnylaunchOperator``
- :mod:`airflow_anylaunch.sensors`: ``AnylaunchAppSensor``
- :mod:`airflow_anylaunch.triggers`: ``AnylaunchAppTrigger`` (the deferred wait)
- :mod:`airflow_anylaunch.hooks`: ``AnylaunchHook`` (the ``anylaunch`` connection type)
- :mod:`airflow_anylaunch.links`: ``AnylaunchAppLink`` (the "anylaunch app" extra link)
- :mod:`airflow_anylaunch.provider`: provider metadata for ``airflow providers list``
"""
