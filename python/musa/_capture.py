"""What code outside musa.jit needs to cooperate with a running capture:
guards on Python state and blocks that run unrecorded.

The jit collects the guards a capture registers (``collect``); libraries
such as musa.optim register them without knowing anything else about the
jit, and the jit knows nothing about them but the description they give.
"""
import threading
from typing import Any, NamedTuple, Optional

from . import _C

__all__ = ["guard", "outside_capture", "capturing"]

_tls = threading.local()


class Guard(NamedTuple):
    """A guard registered while capturing."""
    fn: Any              # () -> the current value of the state
    value: Any           # its value when the capture registered it
    what: Optional[str]  # what the recompile log calls it (None: "Python state <key>")


def capturing():
    """True while a musa.jit capture records on this thread."""
    return _C._jit_capturing()


def guard(key, fn, value, what=None):
    """Register a guard on Python state while a capture runs: the compiled
    variant is used only while fn() == value (checked at every call); any
    other value recompiles, and the recompile log says `what` changed
    (default: "Python state <key>"). key identifies the guard across
    captures. No-op outside captures."""
    guards = getattr(_tls, "guards", None)
    if guards is not None and _C._jit_capturing():
        guards.setdefault(key, Guard(fn, value, what))


class collect:
    """Gather the guards registered while the block runs (used by the jit
    around a capture): ``with collect() as c: ...``, then ``c.guards`` maps
    key -> Guard."""

    def __enter__(self):
        self._outer = getattr(_tls, "guards", None)
        self.guards = _tls.guards = {}
        return self

    def __exit__(self, *exc):
        _tls.guards = self._outer


class outside_capture:
    """Run a block unrecorded while capturing (e.g. creating optimizer state
    that must outlive a compiled run: such tensors enter the graph as
    parameters, bound by reference, and writes to them as mutations)."""

    def __enter__(self):
        self._paused = _C._jit_pause()
        return self

    def __exit__(self, *exc):
        if self._paused:
            _C._jit_resume()
