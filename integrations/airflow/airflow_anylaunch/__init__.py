"""anylaunch for Airflow: launch, watch, stream logs from and cancel anylaunch apps.

Filled in by the Airflow integration; importing it stays cheap.
"""
