"""Tensor.share_memory_ / is_shared and Module.share_memory: memory that a
forked process writes is what the parent reads (Hogwild), and memory that
was not shared stays private to each process."""
import os

import pytest

import musa
import musa.nn as nn

fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def in_child(fn):
    """Run fn in a forked process; its exit status (0: fine)."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@fork
def test_a_shared_tensor_is_written_by_a_forked_child():
    shared = musa.arange(6.0).reshape(2, 3)
    private = musa.arange(6.0).reshape(2, 3)
    assert not shared.is_shared()
    ident = id(shared)
    assert shared.share_memory_() is shared and id(shared) == ident
    assert shared.is_shared() and not private.is_shared()
    assert shared.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert shared.share_memory_() is shared  # again: nothing to do

    def child():
        shared.add_(10)
        private.add_(10)

    assert in_child(child) == 0
    assert shared.tolist() == [[10.0, 11.0, 12.0], [13.0, 14.0, 15.0]]
    assert private.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@fork
def test_hogwild_updates_reach_the_parent():
    musa.manual_seed(0)
    model = nn.Linear(3, 1)
    before = model.weight.detach().clone()
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    opt = musa.optim.SGD(model.parameters(), lr=0.5)
    x, y = musa.ones(4, 3), musa.zeros(4, 1)

    def child():
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    assert in_child(child) == 0
    assert not bool((model.weight == before).all())  # the child's step is the parent's
    assert model.weight.requires_grad and isinstance(model.weight, nn.Parameter)


def test_values_dtypes_and_views():
    for t in (musa.tensor([True, False]), musa.arange(5, dtype=musa.int32),
              musa.randn(3, 4).t(), musa.tensor(2.5)):
        want = t.tolist()
        t.share_memory_()
        assert t.tolist() == want and t.is_shared()
    empty = musa.zeros(0)
    assert empty.share_memory_() is empty
