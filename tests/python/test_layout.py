"""Layouts and the creation functions' layout=, pin_memory= and device=
(every factory, C and Python, checks them alike), nn.DataParallel and
nn.parallel.data_parallel."""
import pickle

import pytest

import musa
import musa.nn as nn

X = musa.ones(2, 3)
FACTORIES = {
    "zeros": lambda **k: musa.zeros(2, **k), "ones": lambda **k: musa.ones(2, **k),
    "empty": lambda **k: musa.empty(2, **k), "full": lambda **k: musa.full((2,), 1.0, **k),
    "zeros_like": lambda **k: musa.zeros_like(X, **k), "ones_like": lambda **k: musa.ones_like(X, **k),
    "empty_like": lambda **k: musa.empty_like(X, **k),
    "full_like": lambda **k: musa.full_like(X, 2.0, **k),
    "rand_like": lambda **k: musa.rand_like(X, **k), "randn_like": lambda **k: musa.randn_like(X, **k),
    "rand": lambda **k: musa.rand(2, **k), "randn": lambda **k: musa.randn(2, **k),
    "randint": lambda **k: musa.randint(0, 3, (2,), **k), "randperm": lambda **k: musa.randperm(4, **k),
    "arange": lambda **k: musa.arange(3, **k), "linspace": lambda **k: musa.linspace(0, 1, 3, **k),
    "eye": lambda **k: musa.eye(2, **k), "tensor": lambda **k: musa.tensor([1.0], **k),
    "normal": lambda **k: musa.normal(0.0, 1.0, (2,), **k),
    "scalar_tensor": lambda **k: musa.scalar_tensor(1.0, **k),
    "empty_strided": lambda **k: musa.empty_strided((2,), (1,), **k),
}
NO_PIN = {  # PyTorch's versions take no pin_memory either
    "randint_like": lambda **k: musa.randint_like(X, 5, **k),
    "logspace": lambda **k: musa.logspace(0, 1, 3, **k), "range": lambda **k: musa.range(0, 2, **k),
    "tril_indices": lambda **k: musa.tril_indices(3, 3, **k),
    "triu_indices": lambda **k: musa.triu_indices(3, 3, **k),
    "hann_window": lambda **k: musa.hann_window(4, **k),
    "hamming_window": lambda **k: musa.hamming_window(4, **k),
    "blackman_window": lambda **k: musa.blackman_window(4, **k),
    "bartlett_window": lambda **k: musa.bartlett_window(4, **k),
    "kaiser_window": lambda **k: musa.kaiser_window(4, **k),
}


def test_tensor_layout():
    assert X.layout is musa.strided and X.t().layout == musa.strided
    assert repr(musa.strided) == "musa.strided" and musa.sparse_coo != musa.strided
    assert pickle.loads(pickle.dumps(musa.sparse_csr)) is musa.sparse_csr
    assert isinstance(musa.strided, musa.layout)


@pytest.mark.parametrize("name", sorted(FACTORIES) + sorted(NO_PIN))
def test_factory_options(name):
    make = FACTORIES.get(name) or NO_PIN[name]
    extra = {} if name in NO_PIN else {"pin_memory": False}
    assert make(layout=musa.strided, device="cpu", **extra).layout is musa.strided
    assert make(layout=None, device=None) is not None
    with pytest.raises(NotImplementedError, match=rf"\[{name}\] layout=musa.sparse_coo"):
        make(layout=musa.sparse_coo)
    with pytest.raises(TypeError, match=rf"\[{name}\] layout must be a musa.layout"):
        make(layout="strided")
    with pytest.raises(RuntimeError, match="not available"):
        make(device="cuda")
    if name in NO_PIN:
        with pytest.raises(TypeError, match="pin_memory"):
            make(pin_memory=True)
    else:
        with pytest.raises(RuntimeError, match=rf"\[{name}\] pin_memory=True"):
            make(pin_memory=True)


def test_data_parallel():
    musa.manual_seed(0)
    inner = nn.Linear(3, 2)
    dp = nn.DataParallel(inner)
    assert nn.DataParallel is nn.parallel.DataParallel
    assert dp.module is inner and list(dp.state_dict()) == ["module.weight", "module.bias"]
    x = musa.randn(4, 3)
    assert bool((dp(x) == inner(x)).all())
    assert bool((nn.parallel.data_parallel(inner, x) == inner(x)).all())
    assert bool((nn.parallel.data_parallel(inner, (x,), module_kwargs={}) == inner(x)).all())
    with pytest.raises(TypeError, match=r"\[DataParallel\]"):
        nn.DataParallel(lambda t: t)
