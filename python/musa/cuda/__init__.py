"""musa.cuda: CUDA is recognised but not available in this build."""
from .. import _C


def is_available():
    """False: this build has no CUDA backend."""
    return _C.cuda_is_available()


def device_count():
    return 0


def synchronize(device=None):
    pass


def manual_seed(seed):
    pass


def manual_seed_all(seed):
    pass


def __getattr__(name):
    # musa.cuda.amp (torch.cuda.amp's names) on first use
    if name == "amp":
        import importlib
        return importlib.import_module(".amp", __name__)
    raise AttributeError(f"module 'musa.cuda' has no attribute '{name}'")
