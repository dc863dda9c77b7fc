"""musa.accelerator: PyTorch's torch.accelerator. musa runs on the CPU, so
no accelerator is available and the CPU is where work runs."""


def is_available():
    """False: musa has no accelerator backend (the CPU runs everything)."""
    return False


def current_accelerator(check_available=False):
    """None: there is no accelerator."""
    return None


def device_count():
    return 0


def synchronize(device=None):
    """Wait for every stream (see musa.Stream)."""
    from .streams import synchronize as _sync
    _sync()
