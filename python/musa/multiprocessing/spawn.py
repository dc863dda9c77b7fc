"""spawn and start_processes: one process per rank, fn(rank, *args) in
each; the first failure (an exception, or an exit with a non-zero code or
a signal) stops the others and is raised in the parent."""
import multiprocessing
import multiprocessing.connection
import signal
import sys
import traceback

__all__ = ["spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException"]


class ProcessException(Exception):
    """A process of a ProcessContext failed: error_index is its rank, pid
    its process id."""

    def __init__(self, msg, error_index, pid):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """fn raised in process error_index; the message ends with its
    traceback."""


class ProcessExitedException(ProcessException):
    """Process error_index exited with exit_code (or was killed by
    signal_name) without raising."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code,
                            self.signal_name)


def _wrap(fn, i, args, error_queue):
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent stops everyone
    except Exception:
        error_queue.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes start_processes started. join(timeout) returns True
    once all have exited with code 0, False while some still run (after
    timeout seconds), and raises the first failure after stopping the
    rest."""

    def __init__(self, processes, error_queues):
        self.processes, self.error_queues = processes, error_queues
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [p.pid for p in self.processes]

    def join(self, timeout=None):
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for s in ready:
            i = self.sentinels.pop(s)
            self.processes[i].join()
            if self.processes[i].exitcode != 0:
                failed = i
                break
        if failed is None:
            return not self.sentinels
        for p in self.processes:
            if p.is_alive():
                p.terminate()
            p.join()
        p, pid = self.processes[failed], self.processes[failed].pid
        if self.error_queues[failed].empty():
            code = p.exitcode
            if code < 0:
                name = signal.Signals(-code).name
                raise ProcessExitedException(f"[spawn] process {failed} terminated with signal {name}",
                                             failed, pid, code, name)
            raise ProcessExitedException(f"[spawn] process {failed} terminated with exit code {code}",
                                         failed, pid, code)
        tb = self.error_queues[failed].get()
        raise ProcessRaisedException(f"[spawn] process {failed} terminated with the following "
                                     f"error:\n{tb}", failed, pid)


class SpawnContext(ProcessContext):
    """The ProcessContext of spawn (torch's name)."""


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Start nprocs processes with multiprocessing's start_method, each
    calling fn(i, *args) for its index i. join=True waits for all and
    raises the first failure; join=False returns the ProcessContext."""
    if not callable(fn):
        raise TypeError(f"[start_processes] fn must be callable, not {type(fn).__name__}")
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"[start_processes] nprocs must be a positive int, not {nprocs!r}")
    if not isinstance(args, tuple):
        raise TypeError(f"[start_processes] args must be a tuple, not {type(args).__name__}")
    ctx = multiprocessing.get_context(start_method)
    queues, procs = [], []
    for i in range(nprocs):
        q = ctx.SimpleQueue()
        p = ctx.Process(target=_wrap, args=(fn, i, args, q), daemon=daemon)
        p.start()
        queues.append(q)
        procs.append(p)
    context = (SpawnContext if start_method == "spawn" else ProcessContext)(procs, queues)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """torch.multiprocessing.spawn: start_processes, by default with the
    spawn start method (fresh interpreters: fn and args must pickle, and
    the calling script must guard its start with `if __name__ ==
    "__main__"`)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
