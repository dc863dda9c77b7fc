"""musa.nn.parallel: PyTorch's names for parallel wrappers.

DistributedDataParallel (distributed.py) trains one replica per process
over musa.distributed (MPI).

DataParallel splits a batch across GPUs in PyTorch; musa has one device,
so it runs the module as is (its kernels already use every thread), with
PyTorch's attribute layout (``model.module``) so checkpoints and code that
unwrap it keep working.
"""
from ..modules.module import Module


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"[DataParallel] module must be a Module, got {type(module).__name__}")
        self.module = module
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """PyTorch's functional DataParallel: module(*inputs, **module_kwargs),
    which is what it does without GPUs."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))


def __getattr__(name):
    # imported on first use: `import musa.nn` stays free of musa.distributed
    if name == "DistributedDataParallel":
        from .distributed import DistributedDataParallel
        return DistributedDataParallel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
