"""anylaunch for Dagster: launch, watch, stream logs from and cancel anylaunch apps.

Filled in by the Dagster integration; importing it stays cheap.
"""
