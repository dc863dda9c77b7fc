"""musa.distributed and DistributedDataParallel: the workers in dist/ run
under `mpirun -np 2` (as root with --allow-run-as-root --oversubscribe)
and, over TCP, under `python3 -m musa.distributed.run` (backend "gloo");
the sampler runs here, against torch's."""
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time

import pytest

import musa
from musa.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(MPIRUN is None or not musa.distributed.is_mpi_available(),
                               reason="Open MPI (openmpi-bin, libopenmpi-dev) is not installed")


def env():
    e = dict(os.environ)
    root = os.path.dirname(os.path.dirname(HERE))
    e["PYTHONPATH"] = os.pathsep.join([os.path.dirname(musa.__path__[0]), root])
    e.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    return e


def mpirun(script, *args, np_=2, timeout=240):
    cmd = [MPIRUN, "-np", str(np_), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    path = script if os.path.isabs(script) else os.path.join(HERE, "dist", script)
    cmd += [sys.executable, path, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcprun(script, *args, np_=2, timeout=240):
    """np_ processes of script over TCP, started by musa's launcher"""
    e = env()
    e["MUSA_TEST_BACKEND"] = "gloo"
    path = script if os.path.isabs(script) else os.path.join(HERE, "dist", script)
    cmd = [sys.executable, "-m", "musa.distributed.run", "--nproc-per-node", str(np_),
           "--master-port", str(free_port()), path, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def launch(backend, script, *args, **kw):
    return (mpirun if backend == "mpi" else tcprun)(script, *args, **kw)


BACKENDS = [pytest.param("mpi", marks=needs_mpi), "gloo"]


@pytest.mark.parametrize("backend,np_", [pytest.param("mpi", 2, marks=needs_mpi), ("gloo", 2),
                                         ("gloo", 3)])
def test_every_collective_and_dtype_matches_numpy(backend, np_):
    r = launch(backend, "collectives.py", np_=np_)
    assert r.returncode == 0, r.stdout + r.stderr
    for rank in range(np_):
        m = re.search(f"rank {rank}: ([0-9]+) passed, 0 failed", r.stdout)
        assert m and int(m.group(1)) >= 164, r.stdout


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["eager", "compiled", "no_sync"])
def test_ddp_matches_single_process_training(mode, backend):
    r = launch(backend, "ddp_train.py", mode)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count(f"{mode}: max |param - single process|") == 2, r.stdout
    if mode == "compiled":
        assert "4 buckets, plan has 4 starts and 4 waits" in r.stdout, r.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_ddp_unused_parameters(backend):
    r = launch(backend, "ddp_unused.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("find_unused_parameters max diff") == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failing_rank_ends_the_job_with_its_message(backend):
    t0 = time.monotonic()
    r = launch(backend, "fail.py", timeout=60)
    took = time.monotonic() - t0
    assert r.returncode != 0
    assert "rank one gave up on purpose" in r.stderr
    assert "aborting the job" in r.stderr
    assert "rank 0 finished" not in r.stdout
    assert took < 30, f"the job took {took:.1f} s to end"


@needs_mpi
def test_group_of_one_errors_and_capture():
    # no launcher: MPI makes this process a group of one
    r = subprocess.run([sys.executable, os.path.join(HERE, "dist", "singleton.py")],
                       capture_output=True, text=True, timeout=120, env=env())
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 failed" in r.stdout


def test_is_available_without_init():
    assert isinstance(musa.distributed.is_available(), bool)
    assert not musa.distributed.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        musa.distributed.get_world_size()


# ---- DistributedSampler (no MPI needed) ----

@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False),
                                                   (2, 4, False), (7, 2, True), (0, 2, False)])
def test_sampler_matches_torch_in_order(n, replicas, drop_last):
    torch = pytest.importorskip("torch")
    from torch.utils.data.distributed import DistributedSampler as TS
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = TS(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


def test_sampler_shuffle_partitions_one_permutation():
    n, replicas = 11, 3
    shares = [list(DistributedSampler(range(n), replicas, r, seed=5)) for r in range(replicas)]
    per = math.ceil(n / replicas)
    assert all(len(s) == per for s in shares)
    merged = [shares[i % replicas][i // replicas] for i in range(per * replicas)]
    g = musa.Generator()
    g.manual_seed(5)
    perm = musa.randperm(n, generator=g).tolist()
    assert merged == perm + perm[:per * replicas - n]
    s = DistributedSampler(range(n), replicas, 0, seed=5)
    first = list(s)
    assert list(s) == first  # same epoch, same order
    s.set_epoch(1)
    assert list(s) != first
    assert sorted(set().union(*[set(DistributedSampler(range(n), replicas, r, seed=5, drop_last=True))
                                for r in range(replicas)])) != []


def test_sampler_errors():
    with pytest.raises(ValueError, match="invalid rank 3"):
        DistributedSampler(range(4), 3, 3)
    with pytest.raises(ValueError, match="num_replicas must be positive"):
        DistributedSampler(range(4), 0, 0)
    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedSampler(range(4))


def test_sampler_in_a_dataloader():
    ds = musa.utils.data.TensorDataset(musa.arange(10.0))
    seen = []
    for rank in range(2):
        dl = musa.utils.data.DataLoader(ds, batch_size=2,
                                        sampler=DistributedSampler(ds, 2, rank, shuffle=False))
        seen += [v for (b,) in dl for v in b.tolist()]
    assert sorted(seen) == [float(i) for i in range(10)]


@pytest.mark.parametrize("backend,static", [pytest.param("mpi", False, marks=needs_mpi),
                                            pytest.param("mpi", True, marks=needs_mpi),
                                            ("gloo", False)])
def test_digits_ddp_example(backend, static):
    """examples/train_digits_ddp.py on 2 processes reaches 95 % with
    identical replicas (the example checks both and exits 1 otherwise)."""
    example = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                           "train_digits_ddp.py")
    r = launch(backend, example, *(["--static"] if static else []), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(ok); replicas identical" in r.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_sync_batch_norm_trains_as_batch_norm_on_the_whole_batch(backend):
    r = launch(backend, "sync_bn.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SyncBatchNorm max |difference from one process|") == 2, r.stdout
