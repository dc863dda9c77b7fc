"""musa.autograd.profiler: PyTorch's older profiler path
(torch.autograd.profiler.profile, record_function); musa has one profiler,
musa.profiler, and these are its objects."""
from ..profiler import EventList, profile, record_function

__all__ = ["profile", "record_function", "EventList"]
