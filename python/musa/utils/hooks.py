"""musa.utils.hooks: the handle that register_*hook calls return (PyTorch's
torch.utils.hooks.RemovableHandle): remove() unregisters the hook, and a
with block removes it on exit."""
from .._tensor import RemovableHandle

__all__ = ["RemovableHandle"]
