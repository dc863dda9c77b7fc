"""What code outside musa.jit needs to cooperate with a running capture:
guards on Python state and blocks that run unrecorded.

The jit collects the guards a capture registers (``collect``); libraries
such as musa.optim register them without knowing anything else about the
jit, and the jit knows nothing about them but the description they give.
"""
import threading
from typing import Any, NamedTuple, Optional

from . import _C

__all__ = ["guard", "fixed", "outside_capture", "capturing"]

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
    _register("guards", key, fn, value, what)


def fixed(key, fn, value, what):
    """Register, while a capture runs, Python state that the recorded ops
    read as it is now and that the rest of the captured function must not
    change: a compiled call runs only the recorded ops, so it would not
    repeat the change (an lr scheduler's step() after the optimizer's, in
    the compiled function). The jit raises when fn() != value at the
    capture's end. No-op outside captures."""
    _register("fixed", key, fn, value, what)


def _register(table, key, fn, value, what):
    """Add a Guard under key to this thread's `table` of the capture being
    collected (the first registration of a key wins); nothing is built
    outside captures, where eager optimizer steps call this every step."""
    held = getattr(_tls, table, None)
    if held is not None and _C._jit_capturing():
        held.setdefault(key, Guard(fn, value, what))


def changed_fixed(fixed_):
    """The (what, then, now) of each state in a collect's ``fixed`` that
    changed since it was registered."""
    out = []
    for g in fixed_.values():
        now = g.fn()
        if now != g.value:
            out.append((g.what, g.value, now))
    return out


class collect:
    """Gather the guards (and fixed state) registered while the block runs
    (used by the jit around a capture): ``with collect() as c: ...``, then
    ``c.guards`` maps key -> Guard, and so does ``c.fixed``."""

    def __enter__(self):
        self._outer = getattr(_tls, "guards", None), getattr(_tls, "fixed", None)
        self.guards = _tls.guards = {}
        self.fixed = _tls.fixed = {}
        return self

    def __exit__(self, *exc):
        _tls.guards, _tls.fixed = self._outer


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
