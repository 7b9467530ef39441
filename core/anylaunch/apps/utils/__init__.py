"""Programs run by the ``utils.*`` components (``copy_main``, ``booth_main``)."""
