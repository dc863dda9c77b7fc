"""musa.distributed over TCP (backend "gloo") and musa.multiprocessing:
processes started by musa.multiprocessing.spawn (the functions of
dist/spawned.py), and argument errors in this process. The workers that
run under both backends (collectives, DDP, SyncBatchNorm, a failing rank)
are test_distributed.py's."""
import datetime
import os
import re
import socket
import sys

import pytest

import musa
import musa.distributed as dist
import musa.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "dist"))
import spawned  # noqa: E402  (importable by the spawned interpreters too)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(fn, world, nprocs=None):
    """spawn fn(rank, world, port, q) on nprocs processes; their reports by rank"""
    q = mp.get_context("spawn").SimpleQueue()
    mp.spawn(fn, args=(world, free_port(), q), nprocs=nprocs or world)
    got = [q.get() for _ in range(nprocs or world)]
    return sorted(got, key=lambda r: r["rank"] if isinstance(r, dict) else r[0])


@pytest.mark.parametrize("world", [1, 3])
def test_collectives_over_a_ring(world):
    for rank, r in enumerate(run(spawned.collect, world)):
        assert r["rank"] == rank and r["world"] == world and r["backend"] == "gloo"
        assert r["all_reduce"] and r["broadcast"]
        assert r["max"] == [float(world - 1)] * 7
        assert r["all_gather"] == [[k] * 3 for k in range(world)]
        assert r["reduce_scatter"] == [float(world * (2 * rank)), float(world * (2 * rank + 1))]
        assert r["after"] is False


def test_ranks_that_call_different_collectives_fail_naming_both():
    (r0, m0, later0), (r1, m1, later1) = run(spawned.diverge, 2)
    for m in (m0, m1):
        assert "the ranks disagree" in m, m
        assert "all_reduce" in m and "broadcast" in m, m
    for later in (later0, later1):
        assert "failed earlier" in later, later


def test_a_late_rank_times_out_its_peer_and_nobody_hangs():
    (_, m0), (_, m1) = run(spawned.late, 2)
    assert "timed out after 1.0 s waiting for rank 1" in m0, m0
    assert "rank 0 closed its connection" in m1 or "failed earlier" in m1, m1


def test_rendezvous_checks_the_world_size_and_duplicate_ranks():
    (_, m0), (_, m1) = run(spawned.sizes, 2)
    assert "rank 1 was given world_size 3, rank 0 world_size 2" in m0, m0
    assert "rank 0 refused the group: rank 1 was given world_size 3" in m1, m1
    got = run(spawned.twice, 3)
    assert "two processes joined as rank 1" in got[0][1], got[0]
    assert all("refused the group: two processes joined as rank 1" in m for _, m in got[1:]), got


def test_spawn_raises_the_child_traceback_and_stops_the_others():
    with pytest.raises(mp.ProcessRaisedException) as e:
        mp.spawn(spawned.raises, nprocs=2)
    assert e.value.error_index == 1
    assert "[spawn] process 1 terminated with the following error" in str(e.value)
    assert "ValueError: rank one gave up on purpose" in str(e.value)
    with pytest.raises(mp.ProcessExitedException,
                       match=r"\[spawn\] process 0 terminated with exit code 3") as e:
        mp.spawn(spawned.exits, nprocs=2)
    assert e.value.exit_code == 3 and e.value.error_index == 0


def test_start_processes_without_join(tmp_path):
    ctx = mp.start_processes(spawned.quiet, args=(str(tmp_path),), nprocs=2, join=False,
                             start_method="fork")
    assert len(ctx.pids()) == 2
    while not ctx.join(timeout=30):
        pass
    assert sorted(os.listdir(tmp_path)) == ["rank0", "rank1"]
    assert {int((tmp_path / f"rank{i}").read_text()) for i in (0, 1)} == set(ctx.pids())
    with pytest.raises(ValueError, match="nprocs must be a positive int"):
        mp.spawn(spawned.quiet, args=("x",), nprocs=0)
    with pytest.raises(TypeError, match="args must be a tuple"):
        mp.spawn(spawned.quiet, args=["x"], nprocs=1)
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    with pytest.raises(ValueError, match="unknown strategy"):
        mp.set_sharing_strategy("telepathy")
    assert mp.Queue is not None and mp.cpu_count() >= 1  # multiprocessing's names


def test_a_group_of_one_forms_again_after_destroy():
    for _ in range(2):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                                world_size=1)
        try:
            assert dist.get_backend() == "gloo" and dist.get_world_size() == 1
            t = musa.arange(4.)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            assert t.tolist() == [0., 1., 2., 3.]
            with pytest.raises(RuntimeError, match="twice"):
                dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1", rank=0,
                                        world_size=1)
        finally:
            dist.destroy_process_group()
    assert not dist.is_initialized()


def test_rendezvous_timeouts_name_what_was_missing():
    port = free_port()
    t = datetime.timedelta(seconds=1)
    with pytest.raises(RuntimeError, match=r"timed out after 1\.0 s waiting for the other ranks "
                                           r"to connect \(1 of 2 ranks arrived\)"):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=2, timeout=t)
    with pytest.raises(RuntimeError, match=f"cannot reach rank 0 at 127.0.0.1:{port}"):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1,
                                world_size=2, timeout=t)
    assert not dist.is_initialized()


def test_init_argument_errors(monkeypatch):
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(ValueError, match="reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from "
                                         "the environment"):
        dist.init_process_group("gloo")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "http")
    with pytest.raises(ValueError, match="MASTER_PORT"):
        dist.init_process_group(rank=0, world_size=1)  # MASTER_ADDR set: backend gloo
    url = "tcp://127.0.0.1:29999"
    cases = [
        (dict(init_method="file:///tmp/x"), ValueError, "'file:///tmp/x' is not supported"),
        (dict(init_method="tcp://127.0.0.1"), ValueError, "must be 'tcp://host:port'"),
        (dict(init_method=url), ValueError, "needs rank= and world_size="),
        (dict(init_method=url, rank=2, world_size=2), ValueError, "rank 2 of world_size 2"),
        (dict(init_method=url, rank="a", world_size=2), ValueError, "rank must be an int"),
        (dict(init_method="tcp://127.0.0.1:0", rank=0, world_size=1), ValueError,
         "port 0 is not in 1..65535"),
        (dict(init_method=url, rank=0, world_size=1, timeout=5), TypeError,
         "timeout must be a datetime.timedelta"),
        (dict(init_method=url, rank=0, world_size=1, timeout=datetime.timedelta(0)), ValueError,
         "it must be positive"),
        (dict(init_method=url, rank=0, world_size=1, store=object()), ValueError, "no store"),
        (dict(init_method="tcp://no-such-host.invalid:5", rank=1, world_size=2), RuntimeError,
         "cannot resolve the address 'no-such-host.invalid'"),
    ]
    for kw, exc, msg in cases:
        with pytest.raises(exc, match=re.escape(msg)):
            dist.init_process_group("gloo", **kw)
    with pytest.raises(ValueError, match="backend 'nccl' needs CUDA GPUs"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="unknown backend 'smoke'"):
        dist.init_process_group("smoke")
    assert not dist.is_initialized()
    assert dist.Backend("GLOO") == dist.Backend.GLOO == "gloo" and dist.Backend("tcp") == "gloo"
    assert dist.is_available() and dist.is_gloo_available() and not dist.is_nccl_available()


def test_rank_0_ignores_strangers_and_refuses_bad_hellos():
    """Rank 0's rendezvous reads what anyone sends to its port: noise
    (random bytes, hellos cut short) is dropped; a well-formed hello with a rank outside
    the group ends the rendezvous, and that process is told why."""
    import struct
    import threading
    port, err = free_port(), []

    def rank0():
        try:
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                    world_size=2, timeout=datetime.timedelta(seconds=20))
        except RuntimeError as e:
            err.append(str(e))

    th = threading.Thread(target=rank0)
    th.start()

    def connect():
        for _ in range(500):
            try:
                return socket.create_connection(("127.0.0.1", port), timeout=20)
            except ConnectionRefusedError:
                th.join(0.01)
        raise AssertionError("rank 0 never listened")

    import random
    rng = random.Random(0)
    hello = struct.pack("!2I", 0x4D555341, 1)  # a valid start, then cut short
    noise = [b"GET / HTTP/1.0\r\n\r\n" + bytes(range(256)), b"MUS",
             struct.pack("!5I", 0x4D555341, 99, 1, 2, 5)]  # another protocol version
    noise += [rng.randbytes(rng.randrange(0, 64)) for _ in range(20)]
    noise += [hello + rng.randbytes(rng.randrange(0, 12)) for _ in range(10)]
    for msg in noise:
        with connect() as s:
            s.sendall(msg)
    with connect() as s:
        s.sendall(struct.pack("!5I", 0x4D555341, 1, 7, 2, 5))
        head = b""
        while len(head) < 16:
            part = s.recv(16 - len(head))
            assert part, "rank 0 closed without answering"
            head += part
        magic, status, size, length = struct.unpack("!4I", head)
        text = b""
        while len(text) < length:
            text += s.recv(length - len(text))
    th.join(30)
    assert (magic, status, size) == (0x4D555341, 1, 2)
    assert text.decode() == "a process joined as rank 7, outside 1..1 (world_size 2)"
    assert err and "a process joined as rank 7" in err[0], err
    assert not dist.is_initialized()


def test_ctrl_c_stops_a_waiting_rendezvous_and_collective():
    import subprocess
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(musa.__path__[0])]))
    r = subprocess.run([sys.executable, os.path.join(HERE, "dist", "interrupt.py"),
                        str(free_port()), str(free_port())], capture_output=True, text=True,
                       timeout=60, env=e)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"rendezvous: KeyboardInterrupt after ([0-9.]+) s", r.stdout)
    assert m and float(m.group(1)) < 10, r.stdout + r.stderr
    m = re.search(r"\nKeyboardInterrupt after ([0-9.]+) s", r.stdout)
    assert m and float(m.group(1)) < 10, r.stdout + r.stderr
    assert "then: [barrier] the process group failed earlier and cannot be used: interrupted" \
        in r.stdout, r.stdout
