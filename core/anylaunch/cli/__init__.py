"""The ``anylaunch`` command-line interface (``anylaunch.cli.main:main``).

One module per subcommand (``cmd_run``, ``cmd_status``, ``cmd_log``, ...), as in TorchX.

Conventions:

- stdout carries results scripts read (the app handle of ``run``, ``status --json``, logs of
  ``log``); progress and errors go to stderr.
- ``--json`` on every subcommand that prints results (``run``, ``status``, ``list``,
  ``describe``, ``log`` as JSON lines, ``cancel``, ``delete``, ``runopts``, ``builtins``,
  ``reap``) prints JSON on stdout instead, through one printer (:mod:`anylaunch.cli.output`).
- People get aligned tables (``list``, ``status``; :mod:`anylaunch.cli.tables`) and, while
  ``run --wait`` waits on a terminal, a status line per role redrawn in place
  (:mod:`anylaunch.cli.live`); off a terminal, or with ``NO_COLOR`` or ``TERM=dumb``, a plain
  line on stderr whenever a role changes.
- What is printed never shows the app's secret env values (names that look secret, or
  named by ``--secret-env``).
- Exit codes: 0 success; 1 error, or ``run --wait`` of an app that did not SUCCEED; 2 usage
  error (argparse, including a component's arguments); 3 ``status`` of an unknown app;
  130 interrupted.
- Ctrl-C while ``run --wait`` waits stops the waiting, not the app: it exits 130 and prints
  the ``anylaunch cancel`` command that stops the app. Waiting is an observer's act; cancelling
  on interrupt would turn a closed terminal into a lost job.
- Expected errors print one line ``anylaunch: error: ...``; ``ANYLAUNCH_DEBUG=1`` adds the
  traceback.
- ``run --stdin`` takes the run's arguments as one JSON object (:mod:`anylaunch.cli.run_args`);
  plugins add or replace subcommands through ``anylaunch.cli.cmds``
  (:mod:`anylaunch.cli.plugin_cmds`).
"""
