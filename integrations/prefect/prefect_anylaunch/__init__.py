"""anylaunch for Prefect: launch, watch, stream logs from and cancel anylaunch apps.

Filled in by the Prefect integration; importing it stays cheap.
"""
