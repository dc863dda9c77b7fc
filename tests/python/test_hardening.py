"""Regressions for bugs found by fuzzing and by probing the API as an
attacker or careless user would: each once crashed, corrupted memory or
returned a wrong result; each must now give a correct result or a clear
error naming the function."""
import numpy as np
import pytest

import musa


# ---- tensor data from lists of tensors (heap overflow) ----

def test_lists_of_one_element_tensors_build_a_tensor_as_in_pytorch():
    assert musa.tensor([musa.ones(1), musa.ones(1)]).shape == (2,)
    t = musa.tensor([musa.tensor(3), musa.tensor(2.5)])
    assert t.dtype == musa.float32 and t.tolist() == [3.0, 2.5]
    b = musa.tensor([[musa.tensor(True)], [musa.tensor(False)]])
    assert b.dtype == musa.bool and b.tolist() == [[True], [False]]
    assert musa.tensor([musa.ones(1, 1) * 7], dtype=musa.int64).tolist() == [7]


@pytest.mark.parametrize("n", [2, 100000])
def test_lists_of_bigger_tensors_raise_instead_of_overflowing(n):
    with pytest.raises(ValueError, match=rf"\[tensor\] only one-element tensors .* {n} elements"):
        musa.tensor([musa.ones(n), musa.ones(n)])
    with pytest.raises(ValueError, match=r"expected a sequence of length 2 at dim 1"):
        musa.tensor([[1.0, 2.0], musa.ones(2)])


# ---- matmul with an empty inner dim (an internal assert aborted) ----

def test_matmul_with_empty_inner_dim_and_zero_strides():
    a = musa.zeros(1).expand(0)
    assert float(a @ a) == 0.0
    x = musa.randn(8, 8, requires_grad=True)
    w = musa.randn(8, 0, requires_grad=True)
    (x @ w).sum().backward()
    assert x.grad.shape == (8, 8) and float(x.grad.abs().sum()) == 0.0
    assert w.grad.shape == (8, 0)
    m = musa.ones(3, 1).expand(3, 0)
    np.testing.assert_array_equal((m @ musa.ones(0, 4)).numpy(), np.zeros((3, 4), np.float32))


# ---- exported memory outlives a rebinding of the tensor (use after free) ----

@pytest.mark.parametrize("export", ["numpy", "asarray", "memoryview"])
def test_exported_arrays_keep_the_storage_alive(export):
    x = musa.arange(1000.0)
    get = {"numpy": lambda t: t.numpy(), "asarray": np.asarray, "memoryview": memoryview}[export]
    a = get(x)
    x.data = musa.zeros(5)
    z = musa.zeros(1000)
    if export == "memoryview":
        a[3] = 42.0
        assert a[3] == 42.0 and a[4] == 4.0
    else:
        a[:] = 42
    assert float(z.sum()) == 0.0 and x.shape == (5,)


# ---- unaligned NumPy memory (misaligned loads in every kernel) ----

def _unaligned(dtype, n):
    """n elements of dtype at an address that is not a multiple of its size."""
    raw = np.zeros(n * np.dtype(dtype).itemsize + 1, dtype=np.uint8)
    a = np.frombuffer(raw.data, dtype=dtype, count=n, offset=1)
    a[...] = np.arange(n)
    assert a.ctypes.data % np.dtype(dtype).itemsize != 0
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_unaligned_arrays_are_copied_by_tensor_and_as_tensor(dtype):
    a = _unaligned(dtype, 5)
    for t in (musa.tensor(a), musa.as_tensor(a), musa.tensor(a[::2])):
        assert (t * 2).tolist() == [2 * v for v in t.tolist()]
    assert musa.as_tensor(a).tolist() == list(range(5))
    assert musa.tensor(a[::2]).tolist() == [0, 2, 4]


def test_from_numpy_refuses_unaligned_arrays_it_cannot_share():
    a = _unaligned(np.float32, 4)
    with pytest.raises(ValueError, match=r"\[from_numpy\] the numpy.ndarray's data is not aligned to its "
                                         r"4-byte elements"):
        musa.from_numpy(a)
    assert musa.from_numpy(a.copy()).tolist() == [0.0, 1.0, 2.0, 3.0]
