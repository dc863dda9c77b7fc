"""musa.Generator: random-number generators of their own, as torch.Generator.

musa draws from one counter-based generator (a seed and a block offset, in
C). A Generator object holds its own (seed, offset); a call given
generator=g runs with g's state in place of the global one and keeps what
it advanced to, so draws from g are reproducible whatever else draws from
the global generator. musa.default_generator is the global one.
Generators are not meant to be shared by threads drawing at once.
"""
import contextlib
import os
import struct

from . import _C

__all__ = ["Generator", "default_generator"]

_DEFAULT_SEED = 67280421310721  # torch.Generator's


class Generator:
    """A random-number generator: manual_seed, seed, initial_seed,
    get_state/set_state (a uint8 tensor of 16 bytes), as torch.Generator."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise ValueError(f"[Generator] musa generators run on the CPU, got device {device!r}")
        self._seed, self._offset = _DEFAULT_SEED, 0

    @property
    def device(self):
        return _C.device("cpu")

    def manual_seed(self, seed):
        """Reseed (any int; negative ones wrap to 64 bits, as in torch); returns self."""
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"[Generator.manual_seed] seed must be an int, got {type(seed).__name__}")
        self._seed, self._offset = seed % (1 << 64), 0
        return self

    def seed(self):
        """Reseed from the operating system's entropy; returns the seed."""
        s = struct.unpack("<Q", os.urandom(8))[0] >> 1
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return self._seed

    def get_state(self):
        return _C.tensor(list(struct.pack("<QQ", self._seed, self._offset)), dtype=_C.uint8)

    def set_state(self, state):
        if not isinstance(state, _C.Tensor) or state.dtype != _C.uint8 or state.numel() != 16:
            raise ValueError("[Generator.set_state] expected a uint8 tensor of 16 bytes, as "
                             "get_state returns")
        self._seed, self._offset = struct.unpack("<QQ", bytes(state.tolist()))
        return self

    @contextlib.contextmanager
    def _use(self):
        """Draw from this generator for the block."""
        saved = _C.get_rng_state()
        _C.set_rng_state((self._seed, self._offset))
        try:
            yield
        finally:
            self._seed, self._offset = _C.get_rng_state()
            _C.set_rng_state(saved)


class _DefaultGenerator(Generator):
    """The global generator (musa.manual_seed's)."""

    def __init__(self):
        pass

    def manual_seed(self, seed):
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"[Generator.manual_seed] seed must be an int, got {type(seed).__name__}")
        _C.manual_seed(seed % (1 << 64))
        return self

    def initial_seed(self):
        return _C.initial_seed()

    @property
    def _seed(self):
        return _C.get_rng_state()[0]

    @property
    def _offset(self):
        return _C.get_rng_state()[1]

    def get_state(self):
        return _C.tensor(list(struct.pack("<QQ", *_C.get_rng_state())), dtype=_C.uint8)

    def set_state(self, state):
        if not isinstance(state, _C.Tensor) or state.dtype != _C.uint8 or state.numel() != 16:
            raise ValueError("[Generator.set_state] expected a uint8 tensor of 16 bytes, as "
                             "get_state returns")
        _C.set_rng_state(struct.unpack("<QQ", bytes(state.tolist())))
        return self

    @contextlib.contextmanager
    def _use(self):
        yield


default_generator = _DefaultGenerator()


def using(generator, who):
    """The context in which `who` draws: generator's, or the global one."""
    if generator is None:
        return contextlib.nullcontext()
    if not isinstance(generator, Generator):
        raise TypeError(f"[{who}] generator must be a musa.Generator, got "
                        f"{type(generator).__name__}")
    return generator._use()


def with_generator(fn, who):
    """fn taking an extra generator= keyword."""
    def wrapper(*args, generator=None, **kwargs):
        with using(generator, who):
            return fn(*args, **kwargs)
    wrapper.__name__ = getattr(fn, "__name__", who)
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    return wrapper
