"""int16 (musa.int16, musa.short): the dtype against PyTorch's - its
arithmetic (wrapping as two's complement), promotion (int8 with uint8 gives
int16, as in PyTorch), reductions, indexing and sorting, and its way in and
out of NumPy, DLPack, buffers, .musa files, PyTorch checkpoints and ONNX
(.npy files: test_file.c)."""
import numpy as np
import pytest

import musa

torch = pytest.importorskip("torch")

VALS = [-32768, -300, -1, 0, 1, 7, 255, 30000, 32767]


def pair(vals=VALS, dtype="int16"):
    return (musa.tensor(vals, dtype=getattr(musa, dtype)),
            torch.tensor(vals, dtype=getattr(torch, dtype)))


def same(m, t):
    assert str(m.dtype).split(".")[1] == str(t.dtype).split(".")[1], (m.dtype, t.dtype)
    assert tuple(m.shape) == tuple(t.shape)
    if m.is_floating_point():  # libm's last bit may differ
        assert np.allclose(m.numpy(), t.numpy(), rtol=1e-6, atol=0, equal_nan=True), (m, t)
    else:
        assert np.array_equal(m.numpy(), t.numpy()), (m, t)


def test_the_dtype():
    assert musa.short is musa.int16 and str(musa.int16) == "musa.int16"
    assert musa.int16.itemsize == 2 and musa.int16.is_signed and not musa.int16.is_floating_point
    assert musa.iinfo(musa.int16).min == -32768 and musa.iinfo(musa.int16).bits == 16
    x = musa.ones(3).short()
    assert x.dtype is musa.int16 and x.type() == "musa.ShortTensor"
    assert musa.ShortTensor([1, 2]).dtype is musa.int16
    assert repr(musa.tensor([-5, 300], dtype=musa.int16)) == \
        "tensor([ -5, 300], dtype=musa.int16)"
    assert musa.tensor([7], dtype=musa.int16).item() == 7
    assert musa.tensor([1, -2], dtype=musa.int16).tolist() == [1, -2]


@pytest.mark.parametrize("other, want", [("int8", "int16"), ("uint8", "int16"),
                                         ("int32", "int32"), ("int64", "int64"),
                                         ("float16", "float16"), ("bool", "int16")])
def test_promotion_as_pytorch(other, want):
    assert musa.promote_types(musa.int16, getattr(musa, other)) is getattr(musa, want)
    assert torch.promote_types(torch.int16, getattr(torch, other)) == getattr(torch, want)
    a = musa.tensor([1, 2], dtype=musa.int16)
    b = musa.tensor([3, 4], dtype=getattr(musa, other))
    assert (a + b).dtype is getattr(musa, want)
    assert (musa.tensor([1], dtype=musa.int8) + musa.tensor([200], dtype=musa.uint8)).tolist() == \
        [201]  # int16 now, where int32 stood in before
    assert (a + 5).dtype is musa.int16 and (a * 1.5).dtype is musa.float32
    assert (a + musa.tensor(5)).dtype is musa.int16  # a 0-d int64 does not promote


@pytest.mark.parametrize("op", ["add", "sub", "mul", "floor_divide", "remainder", "maximum",
                                "minimum", "bitwise_and", "bitwise_or", "bitwise_xor", "eq", "lt",
                                "ge", "div", "true_divide", "atan2", "fmod"])
def test_binary_ops(op):
    (a, ta), (b, tb) = pair(), pair([3, -7, 2, 5, -1, 300, 255, 2, 32767])
    same(getattr(musa, op)(a, b), getattr(torch, op)(ta, tb))


@pytest.mark.parametrize("op", ["neg", "abs", "sign", "bitwise_not", "square", "float", "double",
                                "sqrt", "exp", "sin", "logical_not", "relu"])
def test_unary_ops(op):
    a, ta = pair()
    if op in ("float", "double"):
        same(getattr(a, op)(), getattr(ta, op)())
    elif op == "relu":
        same(musa.relu(a), torch.relu(ta))
    else:
        m, t = getattr(musa, op)(a), getattr(torch, op)(ta)
        if m.is_floating_point():
            assert np.allclose(m.numpy(), t.numpy(), rtol=1e-6, equal_nan=True)
        else:
            same(m, t)


def test_reductions_and_scans():
    a, ta = pair()
    m2, t2 = a.reshape(3, 3), ta.reshape(3, 3)
    for name in ("sum", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum",
                 "cumprod"):
        for dim in (None, 0, 1):
            if dim is None and name in ("cumsum", "cumprod"):
                continue
            m = getattr(m2, name)() if dim is None else getattr(m2, name)(dim)
            t = getattr(t2, name)() if dim is None else getattr(t2, name)(dim)
            if isinstance(t, tuple):
                m, t = m[0], t[0]
            same(m, t)
    same(m2.sum(1, dtype=musa.int16), t2.sum(1, dtype=torch.int16))
    same(a.float().mean(), ta.float().mean())
    assert a.count_nonzero().item() == 8


def test_indexing_sorting_and_shapes():
    a, ta = pair()
    idx = [8, 0, 3, 3]
    same(a[musa.tensor(idx)], ta[torch.tensor(idx)])
    same(a[a > 0], ta[ta > 0])
    same(musa.sort(a, descending=True)[0], torch.sort(ta, descending=True)[0])
    same(musa.topk(a, 3)[0], torch.topk(ta, 3)[0])
    same(musa.unique(musa.cat([a, a])), torch.unique(torch.cat([ta, ta])))
    same(musa.stack([a, a]).t().contiguous(), torch.stack([ta, ta]).t().contiguous())
    same(musa.where(a > 0, a, musa.tensor(-1, dtype=musa.int16)),
         torch.where(ta > 0, ta, torch.tensor(-1, dtype=torch.int16)))
    same(a.clamp(-5, 5), ta.clamp(-5, 5))
    z, tz = musa.zeros(4, dtype=musa.int16), torch.zeros(4, dtype=torch.int16)
    i = [0, 1, 1, 3, 0, 2, 2, 3, 1]
    same(z.scatter_add(0, musa.tensor(i), a), tz.scatter_add(0, torch.tensor(i), ta))
    same(musa.gather(a, 0, musa.tensor([2, 2, 1])), torch.gather(ta, 0, torch.tensor([2, 2, 1])))
    same(musa.full((2, 2), 40000.0 - 40000 + 9, dtype=musa.int16),
         torch.full((2, 2), 9, dtype=torch.int16))
    same(musa.arange(-3, 4, dtype=musa.int16), torch.arange(-3, 4, dtype=torch.int16))
    m = musa.tensor([[1, 2], [3, 4]], dtype=musa.int16)
    t = torch.tensor([[1, 2], [3, 4]], dtype=torch.int16)
    same(m @ m, t @ t)


def test_casts():
    f = musa.tensor([-40000.0, -1.7, 0.5, 2.9, 40000.0, float("nan")])
    # float -> int16 saturates (and nan gives 0), as every musa cast does
    assert f.short().tolist() == [-32768, -1, 0, 2, 32767, 0]
    assert musa.tensor([70000], dtype=musa.int64).short().tolist() == [70000 - 65536]  # wraps
    assert musa.tensor([-2, 300], dtype=musa.int16).to(musa.uint8).tolist() == [254, 44]
    assert musa.tensor([True, False]).short().tolist() == [1, 0]
    with pytest.raises(RuntimeError, match="int16"):
        musa.full((1,), 40000, dtype=musa.int16)


def test_numpy_dlpack_and_buffers():
    arr = np.array([[1, -2], [3, 32767]], dtype=np.int16)
    t = musa.from_numpy(arr)
    assert t.dtype is musa.int16 and t.tolist() == arr.tolist()
    arr[0, 0] = 9
    assert t[0, 0].item() == 9  # shares the memory
    assert musa.tensor(arr).dtype is musa.int16 and musa.as_tensor(arr.T).tolist() == arr.T.tolist()
    back = t.numpy()
    assert back.dtype == np.int16 and np.shares_memory(back, arr)
    assert bytes(memoryview(t)) == arr.tobytes() and memoryview(t).format == "h"
    d = musa.from_dlpack(torch.to_dlpack(torch.tensor([4, -5], dtype=torch.int16)))
    assert d.dtype is musa.int16 and d.tolist() == [4, -5]
    td = torch.from_dlpack(musa.tensor([6, -7], dtype=musa.int16))
    assert td.dtype == torch.int16 and td.tolist() == [6, -7]
    assert musa.frombuffer(bytearray(arr.tobytes()), dtype=musa.int16).tolist() == \
        arr.reshape(-1).tolist()


def test_files(tmp_path):
    x = musa.tensor([[-32768, 5], [0, 32767]], dtype=musa.int16)
    musa.save({"x": x, "view": x.t()}, tmp_path / "a.musa")
    y = musa.load(tmp_path / "a.musa")
    assert y["x"].dtype is musa.int16 and musa.equal(y["x"], x) and musa.equal(y["view"], x.t())
    torch.save({"x": torch.tensor([[1, -2]], dtype=torch.int16)}, tmp_path / "t.pt")
    assert musa.load(tmp_path / "t.pt")["x"].tolist() == [[1, -2]]


def test_autograd_refuses_int16_and_jit_runs_it():
    x = musa.tensor([1, 2], dtype=musa.int16)
    with pytest.raises(RuntimeError):
        x.requires_grad_()

    @musa.jit
    def f(a, b):
        return (a * b + 1).sum(0), a.max()
    a = musa.tensor([[1, -2], [300, 4]], dtype=musa.int16)
    out = f(a, a)
    ta = torch.tensor(a.tolist(), dtype=torch.int16)
    same(out[0], (ta * ta + 1).sum(0))  # 300 * 300 + 1 wraps in int16 first
    assert f(a, a)[1].item() == 300 and f.compiles == 1


@pytest.mark.parametrize("dtype", ["int16", "int8"])
def test_onnx_round_trip(tmp_path, dtype):
    onnx = pytest.importorskip("onnx")
    import musa.onnx

    class M(musa.nn.Module):
        def forward(self, x):
            return (x * 3 + 1).sum(0), x.sum()
    x = musa.tensor([[1, 0], [30, 4]], dtype=getattr(musa, dtype))
    musa.onnx.export(M(), (x,), tmp_path / "m.onnx")
    m = onnx.load(tmp_path / "m.onnx")
    onnx.checker.check_model(m, full_check=True)  # ReduceSum takes no 8/16-bit ints: a Cast first
    assert m.graph.input[0].type.tensor_type.elem_type == {"int16": 5, "int8": 3}[dtype]
    got, want = musa.onnx.load(tmp_path / "m.onnx")(x), M()(x)
    assert [t.tolist() for t in got] == [t.tolist() for t in want] == [[95, 14], 35]
