"""musa.distributed: torch.distributed's interface, over TCP ("gloo") or MPI.

One process per replica. Processes started by musa.multiprocessing.spawn
(or by any launcher that sets MASTER_ADDR, MASTER_PORT, RANK and
WORLD_SIZE) join over TCP:

    def main(rank, world_size):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500",
                                rank=rank, world_size=world_size)
        t = musa.ones(4) * dist.get_rank()
        dist.all_reduce(t)                  # in place: the sum over ranks

    musa.multiprocessing.spawn(main, args=(2,), nprocs=2)

Processes started by MPI's launcher (mpirun -np 2 python3 train.py) call
dist.init_process_group("mpi") and learn their rank from it.

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

__all__ = ["ReduceOp", "Work", "Backend", "is_available", "is_mpi_available", "is_gloo_available",
           "is_nccl_available", "is_initialized",
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
    """torch.distributed's name for the default group (musa has one: every
    rank of the job)."""
    WORLD = None


def is_available():
    """True: the TCP backend ("gloo") is part of every build."""
    return True


def is_mpi_available():
    """Whether this build has its MPI backend (libmusa_mpi.so, built when
    Open MPI's development files were installed)."""
    return _os.path.exists(_os.path.join(_os.path.dirname(_os.path.dirname(__file__)),
                                         "libmusa_mpi.so")) or bool(_os.environ.get("MUSA_MPI_SHIM"))


def is_gloo_available():
    return True


def is_nccl_available():
    return False


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


class Backend(str):
    """The backends' names, as torch.distributed.Backend spells them: GLOO
    (musa's TCP backend), MPI; NCCL needs CUDA GPUs, which musa does not
    drive. Backend("GLOO") == "gloo"."""
    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    UNDEFINED = "undefined"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"[Backend] the backend name must be a str, not {type(name).__name__}")
        value = name.lower()
        if value not in ("gloo", "mpi", "tcp"):
            raise ValueError(f"[Backend] unknown backend {name!r}: musa has 'gloo' (TCP) and 'mpi'"
                             + ("; 'nccl' needs CUDA GPUs" if value == "nccl" else ""))
        return str.__new__(cls, "gloo" if value == "tcp" else value)


def _int_arg(who, name, value):
    try:
        if not isinstance(value, bool):
            return int(value)
    except (TypeError, ValueError):
        pass
    raise ValueError(f"[{who}] {name} must be an int, not {value!r}")


def _tcp_address(init_method, world_size, rank):
    """host, port, rank and world size for the TCP backend, from init_method
    ("env://" or None: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; or
    "tcp://host:port", with rank and world_size given or in its query)."""
    from urllib.parse import parse_qs, urlparse
    who = "init_process_group"
    env = _os.environ
    if init_method is None or init_method == "env://":
        missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if k not in env]
        if rank in (-1, None):
            rank = env.get("RANK")
            if rank is None:
                missing.append("RANK")
        if world_size in (-1, None):
            world_size = env.get("WORLD_SIZE")
            if world_size is None:
                missing.append("WORLD_SIZE")
        if missing:
            raise ValueError(f"[{who}] backend 'gloo' with init_method 'env://' reads "
                             f"{', '.join(missing)} from the environment, and "
                             f"{'it is' if len(missing) == 1 else 'they are'} not set (or pass "
                             f"init_method='tcp://host:port', rank= and world_size=)")
        host, port = env["MASTER_ADDR"], env["MASTER_PORT"]
    elif isinstance(init_method, str) and init_method.startswith("tcp://"):
        u = urlparse(init_method)
        try:
            host, port = u.hostname, u.port
        except ValueError:
            host = port = None
        if not host or port is None:
            raise ValueError(f"[{who}] init_method {init_method!r} must be 'tcp://host:port'")
        q = parse_qs(u.query)
        if rank in (-1, None) and "rank" in q:
            rank = q["rank"][0]
        if world_size in (-1, None) and "world_size" in q:
            world_size = q["world_size"][0]
        if rank in (-1, None) or world_size in (-1, None):
            raise ValueError(f"[{who}] init_method 'tcp://' needs rank= and world_size=")
    else:
        raise ValueError(f"[{who}] init_method {init_method!r} is not supported: musa takes "
                         f"'env://' and 'tcp://host:port' (no 'file://' or store)")
    port = _int_arg(who, "the port (MASTER_PORT)", port)
    return host, port, _int_arg(who, "rank", rank), _int_arg(who, "world_size", world_size)


def _timeout_seconds(timeout):
    import datetime
    if timeout is None:
        return 1800.0  # PyTorch's default
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    raise TypeError(f"[init_process_group] timeout must be a datetime.timedelta, not "
                    f"{type(timeout).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None):
    """Join the job's process group.

    backend "gloo": over TCP, for processes started any way
    (musa.multiprocessing.spawn, a launcher that sets MASTER_ADDR,
    MASTER_PORT, RANK and WORLD_SIZE): init_method "env://" (the default)
    reads those variables, "tcp://host:port" names rank 0's address, and
    rank and world_size arguments override. backend "mpi": rank and world
    size come from MPI's launcher (mpirun; a process started without one is
    a group of one), and world_size and rank, when given, must agree.
    backend None: "mpi" under mpirun or when nothing says where rank 0 is,
    else "gloo". timeout (a datetime.timedelta, 30 minutes by default)
    bounds every wait of the TCP backend. From here on an uncaught exception
    on any rank ends every rank."""
    global _previous_excepthook
    who = "init_process_group"
    if backend is not None:
        if not isinstance(backend, str):
            raise ValueError(f"[{who}] backend must be a str, not {type(backend).__name__}")
        if backend.lower() == "nccl":
            raise ValueError(f"[{who}] backend 'nccl' needs CUDA GPUs; musa runs on the CPU "
                             f"with backend 'gloo' (TCP) or 'mpi'")
        backend = Backend(backend.replace("Backend.", ""))
    elif "OMPI_COMM_WORLD_SIZE" not in _os.environ and (
            init_method is not None or "MASTER_ADDR" in _os.environ):
        backend = Backend.GLOO
    else:
        backend = Backend.MPI
    if store is not None:
        raise ValueError(f"[{who}] musa takes no store: pass init_method ('env://' or "
                         f"'tcp://host:port') for backend 'gloo', or start under mpirun for 'mpi'")
    if _C._dist_is_initialized():
        raise RuntimeError(f"[{who}] trying to initialize the default process group twice")
    seconds = _timeout_seconds(timeout)
    if backend == "gloo":
        host, port, rank, world_size = _tcp_address(init_method, world_size, rank)
        _C._dist_init_tcp(host, port, rank, world_size, seconds)
    else:
        # Open MPI's launcher says the rank and size before MPI starts: check
        # them first (without a launcher this is a group of one)
        size = int(_os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
        me = int(_os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
        if world_size not in (-1, None) and int(world_size) != size:
            raise ValueError(f"[{who}] world_size={world_size}, but MPI started {size} processes")
        if rank not in (-1, None) and int(rank) != me:
            raise ValueError(f"[{who}] rank={rank}, but MPI says this is rank {me}")
        _C._dist_init()
    if _previous_excepthook is None:
        _previous_excepthook = _sys.excepthook
        _sys.excepthook = _abort_on_exception
        _atexit.register(_at_exit)


def destroy_process_group(group=None):
    """Leave the process group: finishes the collectives in flight first.
    A "gloo" group can be formed again; MPI cannot start again in this
    process (MPI_Finalize)."""
    _check_group("destroy_process_group", group)
    _require("destroy_process_group")
    _C._dist_finalize()


def _require(who):
    if not _C._dist_is_initialized():
        raise RuntimeError(f"[{who}] the default process group is not initialized: call "
                           f"musa.distributed.init_process_group() first")


def _check_group(who, group):
    if group is not None and group is not GroupMember.WORLD:
        raise ValueError(f"[{who}] musa has one process group (every rank); pass group=None")


def get_rank(group=None):
    _check_group("get_rank", group)
    _require("get_rank")
    return _C._dist_rank()


def get_world_size(group=None):
    _check_group("get_world_size", group)
    _require("get_world_size")
    return _C._dist_world_size()


def get_backend(group=None):
    """"gloo" (TCP) or "mpi"."""
    _check_group("get_backend", group)
    _require("get_backend")
    return Backend(_C._dist_backend())


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
