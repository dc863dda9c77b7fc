"""musa.multiprocessing: torch.multiprocessing's interface.

Python's multiprocessing (every name of it is here: Process, Queue, Pool,
get_context, ...) plus `spawn` and `start_processes`, which start one
process per rank, call fn(rank, *args) in each and report the first
failure in the parent with the child's traceback:

    def main(rank, world_size):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500",
                                rank=rank, world_size=world_size)
        ...

    if __name__ == "__main__":
        musa.multiprocessing.spawn(main, args=(2,), nprocs=2)

Importing it makes tensors sent through multiprocessing's queues and pipes,
or passed to processes started with spawn or forkserver, travel as shared
memory (reductions.py): the sender's tensor moves to shared memory, the
receiver maps the same memory, and writes on either side reach the other
(Hogwild with `spawn`). Processes forked after `Module.share_memory()`
share it too. The strategy is always file descriptors ("file_system" is
accepted for torch's API and behaves alike).
"""
import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403  (Process, Queue, Pool, get_context, ...)

from .reductions import init_reductions
from .spawn import (ProcessContext, ProcessException, ProcessExitedException,  # noqa: F401
                    ProcessRaisedException, SpawnContext, spawn, start_processes)

__all__ = list(_mp.__all__) + ["spawn", "start_processes", "ProcessContext", "SpawnContext",
                               "ProcessException", "ProcessRaisedException",
                               "ProcessExitedException", "get_sharing_strategy",
                               "set_sharing_strategy", "get_all_sharing_strategies"]

_STRATEGIES = {"file_descriptor", "file_system"}
_strategy = "file_descriptor"


def get_all_sharing_strategies():
    return set(_STRATEGIES)


def get_sharing_strategy():
    return _strategy


def set_sharing_strategy(new_strategy):
    """Accepted for torch's API: musa always passes file descriptors."""
    global _strategy
    if new_strategy not in _STRATEGIES:
        raise ValueError(f"[set_sharing_strategy] unknown strategy {new_strategy!r}: "
                         f"{sorted(_STRATEGIES)}")
    _strategy = new_strategy


init_reductions()
