"""musa.random: the default generator's functions under PyTorch's
torch.random names, and fork_rng."""
import contextlib

from . import get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "fork_rng"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Inside the block the default generator may be used freely; on exit it
    is put back to its state on entry (PyTorch's torch.random.fork_rng).
    devices names CUDA devices, which musa has none of: None or empty."""
    if devices is not None and len(list(devices)) != 0:
        raise ValueError(f"[{_caller}] {_devices_kw}={list(devices)!r}: musa has no "
                         f"{device_type} devices; pass None or an empty list")
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
