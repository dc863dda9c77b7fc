"""Streams and events: asynchronous, ordered work on worker threads.

A :class:`Stream` is a worker thread that runs the ops issued under it in
order; the caller returns at once::

    s = musa.Stream()
    with musa.stream(s):
        y = model(x)          # queued on s
    print(y.sum().item())     # a host read waits for the work it needs

Results equal a synchronous run. musa tracks which stream work reads and
writes each tensor's memory, so work that uses a tensor another stream
produces waits for it, and so do host reads (``.item()``, ``.numpy()``,
``print``, ``bool``). ``wait_stream`` and events order work that no shared
tensor orders, and time it. See docs/streams.md.
"""
import threading

from . import _C

__all__ = ["Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
           "synchronize", "StreamContext"]


class Stream:
    """A stream: a worker thread that runs the work issued under it in order.

    ``threads`` is how many threads its kernels use (default 1): streams are
    for running independent work side by side, each with its share of the
    cores. ``device`` and ``priority`` are accepted for PyTorch's signature;
    only the CPU exists and streams have one priority.
    """

    def __init__(self, device=None, priority=0, *, threads=1):
        if device not in (None, "cpu") and getattr(device, "type", None) != "cpu":
            raise ValueError(f"[Stream] musa streams run on the CPU, got device {device!r}")
        if not isinstance(threads, int) or isinstance(threads, bool):
            raise TypeError(f"[Stream] threads must be an int, got {type(threads).__name__}")
        self._handle = _C._stream_new(threads)
        self.threads = threads
        self.priority = priority

    @classmethod
    def _default(cls):
        s = cls.__new__(cls)
        s._handle, s.threads, s.priority = None, _C.get_num_threads(), 0
        return s

    @property
    def id(self):
        """1, 2, ... for streams made here; 0 for the default stream."""
        return _C._stream_id(self._handle)

    @property
    def device(self):
        return _C.device("cpu")

    def synchronize(self):
        """Wait for all work issued to this stream. A failure in that work
        is raised here (once)."""
        _C._stream_synchronize(self._handle)

    def query(self):
        """True if all work issued to this stream has finished."""
        return _C._stream_query(self._handle)

    def wait_stream(self, other):
        """Work issued to this stream from now on starts after the work
        issued to ``other`` so far. On the default stream, the caller waits."""
        if not isinstance(other, Stream):
            raise TypeError(f"[Stream.wait_stream] expected a musa.Stream, got "
                            f"{type(other).__name__}")
        _C._stream_wait_stream(self._handle, other._handle)

    def wait_event(self, event):
        """Work issued to this stream from now on starts after the event's
        work. On the default stream, the caller waits."""
        if not isinstance(event, Event):
            raise TypeError(f"[Stream.wait_event] expected a musa.Event, got "
                            f"{type(event).__name__}")
        _C._stream_wait_event(self._handle, event._handle)

    def record_event(self, event=None):
        """Record ``event`` (a new one if None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and self.id == other.id

    def __hash__(self):
        return hash(("musa.Stream", self.id))

    def __repr__(self):
        if self._handle is None:
            return "<musa.Stream default (synchronous)>"
        return f"<musa.Stream id={self.id} threads={self.threads}>"

    def __enter__(self):  # `with s:` as with musa.stream(s)
        self._ctx = stream(self)
        return self._ctx.__enter__()

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)


class Event:
    """A point in a stream's work. With ``enable_timing`` it records when
    the stream reached it, for :meth:`elapsed_time` (milliseconds)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise ValueError("[Event] interprocess events are not supported on the CPU")
        self.enable_timing = bool(enable_timing)
        self._handle = _C._event_new(self.enable_timing)

    def record(self, stream=None):
        """Mark the work issued so far to ``stream`` (the current stream if
        None)."""
        stream = current_stream() if stream is None else stream
        if not isinstance(stream, Stream):
            raise TypeError(f"[Event.record] expected a musa.Stream, got {type(stream).__name__}")
        _C._event_record(self._handle, stream._handle)

    def wait(self, stream=None):
        """Make ``stream`` (the current stream if None) wait for this event."""
        stream = current_stream() if stream is None else stream
        stream.wait_event(self)

    def query(self):
        """True if the marked work has finished (or nothing was recorded)."""
        return _C._event_query(self._handle)

    def synchronize(self):
        """Wait for the marked work; a failure in it is raised."""
        _C._event_synchronize(self._handle)

    def elapsed_time(self, end_event):
        """Milliseconds from this event to ``end_event``; both recorded with
        enable_timing=True and complete."""
        if not isinstance(end_event, Event):
            raise TypeError(f"[Event.elapsed_time] expected a musa.Event, got "
                            f"{type(end_event).__name__}")
        return _C._event_elapsed_time(self._handle, end_event._handle)

    def __repr__(self):
        return f"<musa.Event timing={self.enable_timing} done={self.query()}>"


_default = Stream._default()
_tls = threading.local()


def default_stream(device=None):
    """The default stream: the calling thread itself, synchronous."""
    return _default


def current_stream(device=None):
    """This thread's current stream (the default stream unless set)."""
    return getattr(_tls, "current", _default)


def set_stream(s):
    """Make ``s`` this thread's current stream (prefer ``with musa.stream(s)``)."""
    if not isinstance(s, Stream):
        raise TypeError(f"[set_stream] expected a musa.Stream, got {type(s).__name__}")
    _C._stream_set_current(s._handle)
    _tls.current = s


class StreamContext:
    """``with musa.stream(s):`` makes ``s`` current on this thread for the
    block, then restores the stream before. ``None`` changes nothing."""

    def __init__(self, s):
        if s is not None and not isinstance(s, Stream):
            raise TypeError(f"[stream] expected a musa.Stream or None, got {type(s).__name__}")
        self.stream = s
        self._prev = []

    def __enter__(self):
        if self.stream is None:
            return None
        self._prev.append(current_stream())
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            set_stream(self._prev.pop())
        return False


def stream(s):
    """Context manager: issue the block's work to stream ``s``."""
    return StreamContext(s)


def synchronize(device=None):
    """Wait for all work on every stream; raises the first failure."""
    _C._synchronize()
