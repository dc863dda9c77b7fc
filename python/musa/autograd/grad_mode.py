"""musa.autograd.grad_mode: where PyTorch keeps its grad-mode context
managers (torch.autograd.grad_mode); the same objects as musa.autograd's."""
from . import enable_grad, inference_mode, no_grad, set_grad_enabled

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]
