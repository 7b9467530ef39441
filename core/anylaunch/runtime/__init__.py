"""What an app uses while it runs: :mod:`anylaunch.runtime.tracking` (TorchX's
``torchx.runtime``)."""
