"""Bitwise ops on integer and bool tensors: the operators & | ^ ~ << >> and
their in-place forms, the functions and methods, against torch (shift
counts within the dtype's width) and NumPy (counts past it, where PyTorch
1.13 gives the hardware's masked shift), non-contiguous and broadcast
operands, compiled, and the errors."""
import numpy as np
import pytest
import torch

import musa

RNG = np.random.default_rng(29)
INTS = ["int64", "int32", "int8", "uint8"]
RANGES = {"int64": (-(2 ** 40), 2 ** 40), "int32": (-(2 ** 30), 2 ** 30), "int8": (-128, 128),
          "uint8": (0, 256)}
WIDTH = {"int64": 64, "int32": 32, "int8": 8, "uint8": 8}


def ints(dtype, *shape, lo=None, hi=None):
    a, b = RANGES[dtype]
    return RNG.integers(a if lo is None else lo, b if hi is None else hi, shape).astype(dtype)


def both(a):
    return musa.tensor(a), torch.tensor(a)


def same(m, t):
    assert str(m.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (m.dtype, t.dtype)
    np.testing.assert_array_equal(m.numpy(), t.numpy())


@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_and_or_xor_against_torch(dtype, op):
    fn = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[op]
    a, b = ints(dtype, 6, 7), ints(dtype, 7)
    (ma, ta), (mb, tb) = both(a), both(b)
    same(fn(ma, mb), fn(ta, tb))  # broadcast
    same(fn(ma.T, ma.T), fn(ta.T, ta.T))  # transposed views
    same(fn(ma[:, ::2], mb[::2]), fn(ta[:, ::2], tb[::2]))  # strided
    same(fn(ma, 5), fn(ta, 5))
    same(fn(5, ma), fn(5, ta))
    same(getattr(musa, "bitwise_" + op)(ma, mb), getattr(torch, "bitwise_" + op)(ta, tb))
    same(getattr(ma, "bitwise_" + op)(mb), getattr(ta, "bitwise_" + op)(tb))


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_within_the_width_against_torch(dtype):
    a = ints(dtype, 5, 8)
    s = ints(dtype, 8, lo=0, hi=WIDTH[dtype])
    (ma, ta), (ms, ts) = both(a), both(s)
    same(ma << ms, ta << ts)
    same(ma >> ms, ta >> ts)
    same(ma << 3, ta << 3)
    same(ma >> 3, ta >> 3)
    same(musa.bitwise_left_shift(ma, ms), torch.bitwise_left_shift(ta, ts))
    same(ma.bitwise_right_shift(ms), ta.bitwise_right_shift(ts))
    same(ma[:, 1::3] << ms[1::3], ta[:, 1::3] << ts[1::3])


@pytest.mark.parametrize("dtype", INTS)
def test_shifts_past_the_width_as_numpy(dtype):
    w = WIDTH[dtype]
    lo = 0 if dtype == "uint8" else -3
    a, s = ints(dtype, 200), ints(dtype, 200, lo=lo, hi=w + 4)
    ma, ms = musa.tensor(a), musa.tensor(s)
    np.testing.assert_array_equal((ma << ms).numpy(), np.left_shift(a, s))
    np.testing.assert_array_equal((ma >> ms).numpy(), np.right_shift(a, s))


@pytest.mark.parametrize("dtype", INTS)
def test_gcd_and_lcm_against_torch(dtype):
    lo = 0 if dtype == "uint8" else -40
    a, b = ints(dtype, 6, 7, lo=lo, hi=40), ints(dtype, 7, lo=lo, hi=40)
    a[0, :3], b[:3] = 0, 0  # gcd(0, 0) and lcm with a zero
    (ma, ta), (mb, tb) = both(a), both(b)
    same(musa.gcd(ma, mb), torch.gcd(ta, tb))
    same(musa.lcm(ma, mb), torch.lcm(ta, tb))  # int8: wraps as PyTorch
    same(ma.T.gcd(ma.T), ta.T.gcd(ta.T))
    m, t = ma.clone(), ta.clone()
    m.lcm_(mb)
    t.lcm_(tb)
    same(m, t)
    with pytest.raises(TypeError, match=r"\[gcd\] integer tensors only \(got float32"):
        musa.gcd(musa.tensor([1.0]), musa.tensor([2]))


def test_scalar_on_the_left_of_a_shift():
    m, t = both(np.array([0, 3, 7]))
    same(1 << m, 1 << t)
    same(256 >> m, 256 >> t)


@pytest.mark.parametrize("dtype", INTS + ["bool"])
def test_invert(dtype):
    a = RNG.integers(0, 2, (4, 5)).astype(bool) if dtype == "bool" else ints(dtype, 4, 5)
    m, t = both(a)
    same(~m, ~t)
    same(~m.T, ~t.T)
    same(musa.bitwise_not(m), torch.bitwise_not(t))
    same(m.bitwise_not(), t.bitwise_not())


def test_bool_operands_stay_logical_and_mix_with_ints():
    p, q = np.array([True, True, False, False]), np.array([True, False, True, False])
    (mp, tp), (mq, tq) = both(p), both(q)
    same(mp & mq, tp & tq)
    same(mp | mq, tp | tq)
    same(mp ^ mq, tp ^ tq)
    same(mp ^ True, tp ^ True)
    mi, ti = both(np.array([1, 2, 3, 4]))
    same(mi & mp, ti & tp)  # int with bool: int
    same(mi | True, ti | True)


def test_promotion_between_integer_dtypes():
    a8, a64 = np.array([-1, 6], dtype=np.int8), np.array([256, 3])
    r = musa.tensor(a8) & musa.tensor(a64)
    assert r.dtype == musa.int64
    np.testing.assert_array_equal(r.numpy(), [256, 2])
    r = musa.tensor(np.array([200], dtype=np.uint8)) & 15
    assert r.dtype == musa.uint8 and r.tolist() == [8]


@pytest.mark.parametrize("op", ["&=", "|=", "^=", "<<=", ">>="])
def test_in_place_operators_write_into_the_tensor(op):
    a, b = ints("int32", 9), ints("int32", 9, lo=0, hi=31)
    m, t = both(a)
    view = m[::3]
    ms, ts = both(b)
    before = id(m)
    ns_m, ns_t = {"x": m, "y": ms}, {"x": t, "y": ts}
    exec(f"x {op} y", ns_m)
    exec(f"x {op} y", ns_t)
    assert id(ns_m["x"]) == before  # in place, not rebound to a new tensor
    same(m, t)
    same(view, t[::3])


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor",
                                  "bitwise_left_shift", "bitwise_right_shift"])
def test_in_place_methods(name):
    a, b = ints("int64", 6), ints("int64", 6, lo=0, hi=20)
    (m, t), (ms, ts) = both(a), both(b)
    r = getattr(m, name + "_")(ms)
    getattr(t, name + "_")(ts)
    assert r is m
    same(m, t)


def test_logical_in_place_methods_keep_the_dtype():
    m, t = both(np.array([1, 0, 2]))
    m.logical_or_(musa.tensor([0, 0, 1]))
    t.logical_or_(torch.tensor([0, 0, 1]))
    same(m, t)


def test_empty_and_zero_d():
    e = musa.zeros(0, 3, dtype=musa.int32)
    assert (e & 1).shape == (0, 3) and (~e).shape == (0, 3) and (e << 2).shape == (0, 3)
    z = musa.tensor(12)
    assert (z & 10).item() == 8 and (z >> 2).item() == 3 and (~z).item() == -13


def test_compiled_matches_eager():
    def f(x, y):
        return ((x & y) ^ (x << 2)) | (~y >> 1)

    x, y = musa.tensor(ints("int64", 64)), musa.tensor(ints("int64", 64))
    np.testing.assert_array_equal(musa.jit(f)(x, y).numpy(), f(x, y).numpy())


def test_errors_name_the_op_and_the_dtypes():
    f, i = musa.tensor([1.0, 2.0]), musa.tensor([1, 2])
    with pytest.raises(TypeError, match=r"\[bitwise_and\] integer or bool tensors only "
                                        r"\(got float32 and int64\)"):
        f & i
    with pytest.raises(TypeError, match=r"\[bitwise_or\] integer or bool tensors only"):
        i | 1.5
    with pytest.raises(TypeError, match=r"\[bitwise_not\] integer or bool tensors only "
                                        r"\(got float32\)"):
        ~f
    with pytest.raises(TypeError, match=r"\[bitwise_left_shift\] bool tensors are not supported"):
        musa.tensor([True]) << musa.tensor([True])
    with pytest.raises(TypeError, match=r"\[bitwise_right_shift\] integer tensors only"):
        f >> 1
    with pytest.raises(ValueError, match=r"\[bitwise_xor\] shapes \(2,\) and \(3,\) cannot be "
                                         r"broadcast"):
        i ^ musa.tensor([1, 2, 3])
    with pytest.raises(TypeError):
        i &= f  # the float result cannot be written; i is unchanged
    assert i.tolist() == [1, 2]
