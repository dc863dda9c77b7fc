"""x[key] and x[key] = v against NumPy, and indexing gradients."""
import warnings

import numpy as np
import pytest

import musa

A = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

KEYS = [
    0, -1, (1, 2), (1, -1, 3, 4), slice(None), slice(1, None), slice(None, None, 2), (slice(None), 1),
    (Ellipsis, 2), (0, Ellipsis, slice(1, 4, 2)), (None, 0), (slice(None), None, 1), (1, None, None, 2),
    ([0, 1],), ([1, 0], [2, 1]), (slice(None), [0, 2], [1, 3]), (slice(None), [0, 2], slice(None), [1, 3]),
    ([[0], [1]], [0, 2]), (0, [2, 0, 1]), (Ellipsis, [4, 0]), (slice(None), slice(1, 3), [1, 2]),
    (np.array([1, 0]),), ([-1, -2], 0), (slice(5, 9),), (slice(None), slice(2, 1)), ([],),
    (np.int64(1), 0), (np.array(1), [0, 1]),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_getitem_matches_numpy(key):
    t = musa.tensor(A)
    got = t[key]
    want = A[key]
    assert tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_bool_masks():
    t = musa.tensor(A)
    m = A > 60
    np.testing.assert_array_equal(t[musa.tensor(m)].numpy(), A[m])
    m2 = A[:, :, 0, 0] > 5
    np.testing.assert_array_equal(t[musa.tensor(m2)].numpy(), A[m2])
    m3 = np.array([True, False, True, True])
    np.testing.assert_array_equal(t[:, :, musa.tensor(m3)].numpy(), A[:, :, m3])
    np.testing.assert_array_equal(t[0, 0, musa.tensor(m3)].numpy(), A[0, 0, m3])
    np.testing.assert_array_equal(t[m].numpy(), A[m])  # a NumPy mask
    assert t[musa.zeros(2, 3, 4, 5, dtype=musa.bool)].shape == (0,)
    assert t[True].shape == (1, 2, 3, 4, 5) and t[False].shape == (0, 2, 3, 4, 5)
    with pytest.raises(IndexError, match="mask"):
        t[musa.ones(3, dtype=musa.bool)]


def test_integers_with_advanced_indices_follow_pytorch():
    # PyTorch applies integers first (a select), NumPy treats them as advanced indices
    t = musa.tensor(A)
    assert t[1, :, [3], [0, 1]].shape == (3, 2)


def test_basic_indexing_is_a_view():
    t = musa.tensor(A.copy())
    v = t[1, :, ::2]
    v += 1000
    assert t[1, 0, 0, 0].item() == A[1, 0, 0, 0] + 1000
    assert t[1, 0, 1, 0].item() == A[1, 0, 1, 0]


SET_KEYS = [
    (0,), (slice(None), 1), (Ellipsis, 2), ([0, 1], [2, 0]), (slice(None), [0, 2], [1, 3]), (1, slice(1, 3), [0, 3]),
]


@pytest.mark.parametrize("key", SET_KEYS, ids=[repr(k) for k in SET_KEYS])
def test_setitem_matches_numpy(key):
    t = musa.tensor(A.copy())
    n = A.copy()
    val = np.float32(-7)
    t[key] = -7.0
    n[key] = val
    np.testing.assert_array_equal(t.numpy(), n)
    # a broadcast tensor value
    shape = n[key].shape
    src = np.random.RandomState(0).randn(*shape[-1:]).astype(np.float32) if shape else np.float32(3)
    t[key] = musa.tensor(src)
    n[key] = src
    np.testing.assert_array_equal(t.numpy(), n)


def test_masked_assignment():
    t = musa.tensor(A.copy())
    n = A.copy()
    t[t > 50] = 0
    n[n > 50] = 0
    np.testing.assert_array_equal(t.numpy(), n)
    t[:, 0] = musa.arange(20).reshape(4, 5).float()
    n[:, 0] = np.arange(20).reshape(4, 5)
    np.testing.assert_array_equal(t.numpy(), n)


def test_indexing_gradients():
    x = musa.randn(4, 5, dtype=musa.float64, requires_grad=True)
    y = x[[0, 2, 2], 1:4] * musa.arange(3, dtype=musa.float64)
    y.sum().backward()
    want = np.zeros((4, 5))
    want[0, 1:4] += [0, 1, 2]
    want[2, 1:4] += 2 * np.array([0, 1, 2])
    np.testing.assert_allclose(x.grad.numpy(), want)
    assert musa.autograd.gradcheck(lambda t: t[:, [1, 3]][[0, 0, 3]], [x])
    assert musa.autograd.gradcheck(lambda t: t[t > 0], [x])


def test_setitem_on_leaf_requiring_grad_is_refused():
    x = musa.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        x[0] = 1
    y = x * 1
    y[0] = 5  # non-leaf: allowed, recorded
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


def test_index_errors():
    t = musa.tensor(A)
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0, 0]
    with pytest.raises(IndexError, match="out of bounds"):
        t[:, 3]
    with pytest.raises(IndexError, match="out of bounds"):
        t[musa.tensor([0, 2])]
    with pytest.raises(IndexError):
        t[musa.tensor([0.5])]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(ValueError, match="step"):
        t[::-1]
    with pytest.raises(IndexError):
        t[{}]
    with pytest.raises(TypeError):
        del t[0]


def test_uint8_index_is_a_mask_as_in_pytorch():
    # PyTorch reads a uint8 index as a mask (deprecated, with a warning);
    # musa took it for integer positions and answered another question
    # (fuzz-py seed 14874, through masked_select)
    torch = pytest.importorskip("torch")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for key in (np.array([1, 0, 2], np.uint8), np.array(1, np.uint8), np.array(0, np.uint8),
                np.array([[0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 0, 5]], np.uint8)):
        # a musa tensor, and a NumPy array (0-d ones index as ints, as NumPy scalars do)
        for wrap in (musa.tensor, lambda k: k) if key.ndim else (musa.tensor,):
            with pytest.warns(UserWarning, match=r"\[index\] a uint8 index is a mask"):
                got = musa.tensor(x)[wrap(key)]
            with warnings.catch_warnings():  # (torch warns once)
                warnings.simplefilter("ignore")
                want = torch.tensor(x)[torch.tensor(key)]
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    t, m = musa.tensor(x), musa.tensor([1, 0, 1], dtype=musa.uint8)
    with pytest.warns(UserWarning):
        t[m] = -1.0
    assert t.numpy()[:, 0].tolist() == [-1.0, 4.0, -1.0]


def test_masked_select_takes_bool_or_uint8_masks_and_broadcasts_both_ways():
    torch = pytest.importorskip("torch")
    a = np.array([[2], [3], [4]], np.uint8)
    for mask in (np.array(0, np.uint8), np.array(1, np.uint8), np.array([1, 0], np.uint8)):
        with pytest.warns(UserWarning, match=r"\[masked_select\] a uint8 mask"):
            got = musa.tensor(a).masked_select(musa.tensor(mask))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch.tensor(a).masked_select(torch.tensor(mask))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    got = musa.masked_select(musa.tensor([1, 2]), musa.tensor([[True], [False]]))
    assert got.tolist() == torch.masked_select(torch.tensor([1, 2]), torch.tensor([[True], [False]])).tolist()
    with pytest.raises(TypeError, match=r"^\[masked_select\] mask must be a bool \(or uint8\) tensor, got "
                                        r"musa.int64"):
        musa.tensor([1.0, 2.0]).masked_select(musa.tensor([1, 0]))
