"""musa.utils: helpers around the core; ``musa.utils.data`` loads datasets in batches."""
from . import data  # noqa: F401

__all__ = ["data"]
