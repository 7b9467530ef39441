"""Small programs that the built-in components run (``python3 -m anylaunch.apps...``).

Each one is a script with a ``main(argv)`` entry point; it imports only what it needs, so it
runs wherever ``anylaunch`` and its required dependencies are installed.
"""
