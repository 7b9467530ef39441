"""anylaunch: launch one portable job definition on many schedulers and workflow engines.

Importing the package is cheap: no backend SDK or orchestrator is imported until a scheduler
or integration that needs it is used.
"""

__version__ = "0.1.0"
