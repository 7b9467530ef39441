"""Programs run by the ``serve.*`` components (``serve``: upload a model to torchserve)."""
