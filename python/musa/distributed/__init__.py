"""musa.distributed: torch.distributed's interface on MPI.

Start one process per replica with MPI's launcher; each learns its rank and
the world size from it:

    mpirun -np 2 python3 train.py

    import musa.distributed as dist
    dist.init_process_group("mpi")
    t = musa.ones(4) * dist.get_rank()
    dist.all_reduce(t)                      # in place: the sum over ranks

Collectives take tensors of every dtype and layout and check, between ranks,
that every rank passed the same dtype and shape. They are ops, so a
function compiled with musa.jit records them as graph nodes. See
docs/distributed.md.
"""
import atexit as _atexit
import enum as _enum
import os as _os
import sys as _sys

from .. import _C
from ..autograd import no_grad as _no_grad

__all__ = ["ReduceOp", "Work", "is_available", "is_mpi_available", "is_initialized",
           "init_process_group", "destroy_process_group", "get_rank", "get_world_size",
           "get_backend", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "barrier", "GroupMember"]


class ReduceOp(_enum.IntEnum):
    """The reductions of all_reduce and reduce_scatter (AVG: floating
    dtypes only)."""
    SUM = 0
    AVG = 1
    MAX = 2
    MIN = 3


class GroupMember:
    """torch.distributed's name for the default group (musa has one: MPI's
    world)."""
    WORLD = None


def is_available():
    """Whether this build has its MPI backend (libmusa_mpi.so, built when
    Open MPI's development files were installed)."""
    return _os.path.exists(_os.path.join(_os.path.dirname(_os.path.dirname(__file__)),
                                         "libmusa_mpi.so")) or bool(_os.environ.get("MUSA_MPI_SHIM"))


def is_mpi_available():
    return is_available()


def is_initialized():
    return _C._dist_is_initialized()


_previous_excepthook = None


def _abort_on_exception(kind, value, tb):
    """An uncaught exception on one rank would leave the others waiting in a
    collective forever: print it, then end the whole job (MPI_Abort)."""
    (_previous_excepthook or _sys.__excepthook__)(kind, value, tb)
    if _C._dist_is_initialized() and _C._dist_world_size() > 1:
        _sys.stderr.write(f"[musa.distributed] rank {_C._dist_rank()} raised "
                          f"{kind.__name__}; aborting the job\n")
        _C._dist_abort(1)


def _at_exit():
    if _C._dist_is_initialized():
        _C._dist_finalize()


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None):
    """Join the job's process group: rank and world size come from MPI's
    launcher (a process started without one is a group of one). backend:
    "mpi" (or None). world_size and rank, when given, must agree with MPI's.
    From here on an uncaught exception on any rank ends every rank."""
    global _previous_excepthook
    if backend is not None and str(backend).lower() != "mpi":
        raise ValueError(f"[init_process_group] backend {backend!r} is not available: musa "
                         f"communicates through MPI (backend='mpi')")
    if store is not None:
        raise ValueError("[init_process_group] a store is not used by the MPI backend; start the "
                         "processes with mpirun")
    if _C._dist_is_initialized():
        raise RuntimeError("[init_process_group] trying to initialize the default process group "
                           "twice")
    # Open MPI's launcher says the rank and size before MPI starts: check
    # them first (without a launcher this is a group of one)
    size = int(_os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    me = int(_os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    if world_size not in (-1, None) and int(world_size) != size:
        raise ValueError(f"[init_process_group] world_size={world_size}, but MPI started "
                         f"{size} processes")
    if rank not in (-1, None) and int(rank) != me:
        raise ValueError(f"[init_process_group] rank={rank}, but MPI says this is rank {me}")
    _C._dist_init()
    if _previous_excepthook is None:
        _previous_excepthook = _sys.excepthook
        _sys.excepthook = _abort_on_exception
        _atexit.register(_at_exit)


def destroy_process_group(group=None):
    """Leave the process group (MPI_Finalize): finishes the collectives in
    flight first. MPI cannot start again in this process."""
    _check_group("destroy_process_group", group)
    _require("destroy_process_group")
    _C._dist_finalize()


def _require(who):
    if not _C._dist_is_initialized():
        raise RuntimeError(f"[{who}] the default process group is not initialized: call "
                           f"musa.distributed.init_process_group() first")


def _check_group(who, group):
    if group is not None and group is not GroupMember.WORLD:
        raise ValueError(f"[{who}] musa has one process group (MPI's world); pass group=None")


def get_rank(group=None):
    _check_group("get_rank", group)
    _require("get_rank")
    return _C._dist_rank()


def get_world_size(group=None):
    _check_group("get_world_size", group)
    _require("get_world_size")
    return _C._dist_world_size()


def get_backend(group=None):
    _check_group("get_backend", group)
    _require("get_backend")
    return "mpi"


def _op(who, op):
    try:
        return int(ReduceOp(int(op)))
    except (ValueError, TypeError):
        raise ValueError(f"[{who}] unsupported reduce op {op!r}: musa has ReduceOp.SUM, AVG, "
                         f"MAX and MIN") from None


class Work:
    """The handle of a collective started with async_op=True: wait() for it
    (the tensors hold the result afterwards), is_completed() after that."""

    def __init__(self, finish=None):
        self._finish = finish

    def wait(self, timeout=None):
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()
        return True

    def is_completed(self):
        return self._finish is None

    def result(self):
        return []


def _tensor(who, t, what="tensor"):
    if not isinstance(t, _C.Tensor):
        raise TypeError(f"[{who}] {what} must be a Tensor, not {type(t).__name__}")
    return t


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over every rank, in place. With async_op=True the
    reduction runs while the caller goes on; the returned Work's wait()
    writes the result into `tensor` (which must not change meanwhile)."""
    _check_group("all_reduce", group)
    _tensor("all_reduce", tensor)
    op = _op("all_reduce", op)
    if not async_op:
        _C._dist_all_reduce(tensor, op)
        return None
    _require("all_reduce")
    flat = _C._dist_all_reduce_start([tensor], op)

    def finish():
        with _no_grad():
            tensor.copy_(_C._dist_all_reduce_wait(flat, op).view(tensor.shape))
    return Work(finish)


def broadcast(tensor, src=0, group=None, async_op=False):
    """tensor becomes rank src's tensor, in place."""
    _check_group("broadcast", group)
    _C._dist_broadcast(_tensor("broadcast", tensor), int(src))
    return Work() if async_op else None


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """tensor_list[r] gets rank r's tensor."""
    _check_group("all_gather", group)
    _tensor("all_gather", tensor)
    out = _C._dist_all_gather(tensor)
    if not isinstance(tensor_list, list) or len(tensor_list) != out.shape[0]:
        raise ValueError(f"[all_gather] tensor_list must be a list of {out.shape[0]} tensors "
                         f"(one per rank)")
    with _no_grad():
        for r, t in enumerate(tensor_list):
            _tensor("all_gather", t, f"tensor_list[{r}]").copy_(out[r])
    return Work() if async_op else None


def _fill(who, out, name, res, what):
    """Write a collective's result into the caller's tensor `out`."""
    if out.numel() != res.numel():
        raise ValueError(f"[{who}] {name} has {out.numel()} elements; {what} has {res.numel()}")
    with _no_grad():
        out.copy_(res.reshape(out.shape))


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """output_tensor (world_size * n rows, or world_size stacked tensors)
    gets every rank's input_tensor in rank order."""
    who = "all_gather_into_tensor"
    _check_group(who, group)
    _tensor(who, output_tensor, "output_tensor")
    out = _C._dist_all_gather(_tensor(who, input_tensor))
    _fill(who, output_tensor, "output_tensor", out, "the gathered tensors")
    return Work() if async_op else None


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """output gets block `rank` (of world_size equal blocks along dim 0) of
    the reduction of every rank's input."""
    who = "reduce_scatter_tensor"
    _check_group(who, group)
    _tensor(who, output, "output")
    res = _C._dist_reduce_scatter(_tensor(who, input), _op(who, op))
    _fill(who, output, "output", res, "each rank's block")
    return Work() if async_op else None


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """output gets the reduction over ranks of input_list[rank]."""
    if not isinstance(input_list, (list, tuple)) or not input_list:
        raise ValueError("[reduce_scatter] input_list must be a non-empty list of tensors")
    return reduce_scatter_tensor(output, _C.stack([_tensor("reduce_scatter", t) for t in input_list]),
                                 op, group, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank has reached the barrier."""
    _check_group("barrier", group)
    _C._dist_barrier()
    return Work() if async_op else None
