"""The last torch names built from musa's pieces (_torch_methods_more.py),
against torch 1.13."""
import array

import numpy as np
import pytest
import torch

import musa

X = np.array([[1.0, -0.2, 0.7], [0.3, 2.0, -1.5], [0.0, 0.4, 1.1]])


def both(x=X):
    return musa.tensor(x), torch.tensor(x)


def test_methods_against_torch():
    m, t = both()
    np.testing.assert_array_equal(m.hardshrink().numpy(), t.hardshrink().numpy())
    np.testing.assert_array_equal(m.hardshrink(0.5).numpy(), t.hardshrink(0.5).numpy())
    w = np.array([0.25])
    np.testing.assert_allclose(m.prelu(musa.tensor(w)).numpy(), t.prelu(torch.tensor(w)).numpy())
    for n in (0, 1, 3, -2):
        np.testing.assert_allclose(m.matrix_power(n).numpy(), t.matrix_power(n).numpy(), rtol=1e-12)
        np.testing.assert_allclose(musa.matrix_power(m, n).numpy(), torch.matrix_power(t, n).numpy(), rtol=1e-12)
    for name, args in (("split_with_sizes", ([1, 2],)), ("unsafe_split", (2,)), ("unsafe_chunk", (2, 1)),
                       ("unsafe_split_with_sizes", ([2, 1], 1))):
        got, want = getattr(m, name)(*args), getattr(t, name)(*args)
        assert len(got) == len(want)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    for name in ("is_conj", "is_neg", "is_inference"):
        assert getattr(m, name)() == getattr(t, name)() is False
    for name in ("conj", "resolve_conj", "resolve_neg", "conj_physical"):
        np.testing.assert_array_equal(getattr(m, name)().numpy(), getattr(t, name)().numpy())
    assert m.real is m
    with pytest.raises(RuntimeError, match=r"\[imag\] imag is not implemented"):
        m.imag


def test_new_and_new_empty_strided():
    m, t = both()
    for args in ((2, 3), (), ([1, 2],), (m.shape,)):
        targs = tuple(torch.Size(a) if isinstance(a, tuple) and type(a).__name__ == "Size" else a for a in args)
        got, want = m.new(*args), t.new(*targs)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype == musa.float64
    np.testing.assert_array_equal(m.new([1, 2]).numpy(), t.new([1, 2]).numpy())
    i = musa.tensor([1, 2]).new([3.7])
    assert i.dtype == musa.int64 and i.tolist() == [3]
    with pytest.raises(TypeError, match=r"\[Tensor.new\]"):
        m.new(2, "x")
    s = m.new_empty_strided((2, 3), (1, 2))
    assert s.shape == (2, 3) and s.stride() == (1, 2) and s.dtype == musa.float64


def test_functions_against_torch():
    m, t = both()
    np.testing.assert_array_equal(musa.adjoint(m).numpy(), torch.adjoint(t).numpy())
    assert musa.adjoint(m).stride() == (1, 3)  # a view
    with pytest.raises(ValueError, match=r"\[adjoint\]"):
        musa.adjoint(musa.zeros(3))
    assert musa.get_device(m) == torch.get_device(t) == -1
    for dt, tdt in ((musa.float32, torch.float32), (musa.int8, torch.int8), (musa.uint8, torch.uint8),
                    (musa.bool, torch.bool)):
        assert musa.is_signed(musa.zeros(1, dtype=dt)) == torch.is_signed(torch.zeros(1, dtype=tdt))
    z = musa.zeros(3)
    assert musa.fill_(z, 2.5) is z and z.tolist() == [2.5] * 3
    assert musa.init_num_threads() is None


def test_frombuffer_shares_memory_as_torch():
    b = bytearray(np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32).tobytes())
    m = musa.frombuffer(b, dtype=musa.float32)
    t = torch.frombuffer(bytearray(b), dtype=torch.float32)
    np.testing.assert_array_equal(m.numpy(), t.numpy())
    m[1] = 9.0  # writes through to the buffer
    assert np.frombuffer(b, dtype=np.float32)[1] == 9.0
    part = musa.frombuffer(b, dtype=musa.float32, count=2, offset=8)
    np.testing.assert_array_equal(part.numpy(), torch.frombuffer(bytearray(b), dtype=torch.float32, count=2,
                                                                 offset=8).numpy())
    a = array.array("i", [5, -6, 7])
    np.testing.assert_array_equal(musa.frombuffer(a, dtype=musa.int32).numpy(), [5, -6, 7])
    bf = musa.frombuffer(bytes(np.array([1.0, -2.0], dtype=np.float32).tobytes()), dtype=musa.bfloat16)
    assert bf.dtype == musa.bfloat16 and bf.shape == (4,)
    with pytest.raises(ValueError, match=r"\[frombuffer\] requested 5 elements"):
        musa.frombuffer(b, dtype=musa.float32, count=5)
    with pytest.raises(ValueError, match=r"\[frombuffer\] the buffer's 15 bytes"):
        musa.frombuffer(b, dtype=musa.float32, offset=1)
    with pytest.raises(ValueError, match=r"\[frombuffer\] offset 16 is past"):
        musa.frombuffer(b, dtype=musa.float32, offset=16)
    # an empty buffer: offset 0 gives an empty tensor, any other offset is past it
    # (fuzz-py seed 17802: NumPy's own message came through)
    assert musa.frombuffer(bytearray(), dtype=musa.uint8).shape == (0,)
    with pytest.raises(ValueError, match=r"\[frombuffer\] offset 3 is past the buffer's 0 bytes"):
        musa.frombuffer(bytearray(), dtype=musa.uint8, offset=3)
    with pytest.raises(TypeError, match=r"\[frombuffer\] a list does not expose"):
        musa.frombuffer([1, 2], dtype=musa.float32)
    with pytest.raises(TypeError, match=r"\[frombuffer\] dtype must be a musa dtype, got None"):
        musa.frombuffer(b, dtype=None)
    with pytest.raises(BufferError, match=r"\[frombuffer\] the memoryview's memory is not contiguous \(strides \(2,\)\)"):
        musa.frombuffer(memoryview(b)[::2], dtype=musa.uint8)
    with pytest.raises(BufferError, match=r"\[frombuffer\] the Tensor's memory is not contiguous"):
        musa.frombuffer(musa.ones(1).expand(4), dtype=musa.float32)
    assert musa.frombuffer(b, dtype=musa.float32, requires_grad=True).requires_grad


def test_inference_mode_flag_and_default_tensor_type():
    assert musa.is_inference_mode_enabled() is False
    with musa.inference_mode():
        assert musa.is_inference_mode_enabled() and not musa.is_grad_enabled()
        with musa.inference_mode(False):
            assert not musa.is_inference_mode_enabled()
        assert musa.is_inference_mode_enabled()
    assert not musa.is_inference_mode_enabled() and musa.is_grad_enabled()

    @musa.inference_mode()
    def f():
        return musa.is_inference_mode_enabled()
    assert f() and not musa.is_inference_mode_enabled()
    try:
        musa.set_default_tensor_type(musa.DoubleTensor)
        assert musa.zeros(1).dtype == musa.float64
        musa.set_default_tensor_type("torch.FloatTensor")
        assert musa.zeros(1).dtype == musa.float32
        with pytest.raises(TypeError, match=r"\[set_default_tensor_type\]"):
            musa.set_default_tensor_type(musa.LongTensor)
    finally:
        musa.set_default_dtype(musa.float32)
