"""The op table as Python sees it: every row of src/ops/ops.def is bound as
its `py` column says (musa._C._op_table() lists the rows), and the musa
namespace holds the functions _C registers for it (_C._exports)."""
import pytest

import musa
from musa import _C

# the spec a generated binding gets from the row's fn column (_C/ops.c)
GENERATED_SPEC = {"unary": "input:T * out:T=None", "binary": "input:S other:S * out:T=None"}


def _generated(obj):
    """The binding itself, through a Python wrapper that adds keywords
    (memory_format=) and keeps it as __wrapped__."""
    return getattr(obj, "__wrapped__", obj)


def _problems(name, fn, py):
    in_c = name in vars(_C)
    method = hasattr(musa.Tensor, name)
    if py == "gen":
        if fn not in GENERATED_SPEC:
            return f"py gen, but fn {fn} has no generated binding"
        spec = GENERATED_SPEC[fn]
        if not (in_c and getattr(_C, name).__doc__ == spec):
            return f"py gen, but _C.{name} is not the generated binding '{spec}'"
        if not (method and _generated(getattr(musa.Tensor, name)).__doc__ == spec):
            return f"py gen, but Tensor.{name} is not the generated binding '{spec}'"
        if getattr(musa, name, None) is None:
            return f"py gen, but musa.{name} is missing"
    elif py == "hand":
        if not (in_c or method):
            return f"py hand, but neither _C.{name} nor Tensor.{name} exists (write its DEF)"
    elif py == "none":
        if in_c or method:
            return f"py none, but {'_C' if in_c else 'Tensor'}.{name} exists (mark the row py hand)"
    else:
        return f"unknown py column {py}"
    if fn == "internal" and py != "none":
        return "fn internal (no public function), but py is not none"
    return None


def test_every_op_row_is_bound_as_its_py_column_says():
    rows = _C._op_table()
    assert [r[0] for r in rows] == list(_C._op_names())
    problems = [f"{name}: {p}" for name, fn, py in rows if (p := _problems(name, fn, py))]
    assert not problems, "\n".join(problems)


def test_generated_bindings_compute_their_op():
    x = musa.tensor([0.25, 4.0])
    y = musa.tensor([2.0, 4.0])
    assert musa.neg(x).tolist() == [-0.25, -4.0]
    assert x.sqrt().tolist() == [0.5, 2.0]
    assert musa.maximum(x, 1).tolist() == [1.0, 4.0]
    assert musa.matmul(x, y).item() == 16.5
    assert y.pow(2).tolist() == [4.0, 16.0]
    assert musa.lt(x, y).tolist() == [True, False]


def test_generated_bindings_write_into_out_as_pytorch_does():
    x, y = musa.tensor([0.25, 4.0]), musa.tensor([2.0, 4.0])
    o = musa.empty(2)
    assert musa.sqrt(x, out=o) is o and o.tolist() == [0.5, 2.0]
    assert musa.mul(x, y, out=o) is o and o.tolist() == [0.5, 16.0]
    assert musa.mul(3, y, out=o) is o and o.tolist() == [6.0, 12.0]
    od = musa.empty(2, dtype=musa.float64)  # the result casts to out's dtype
    assert musa.neg(x, out=od).tolist() == [-0.25, -4.0] and od.dtype is musa.float64
    assert musa.lt(x, y, out=musa.empty(2)).tolist() == [1.0, 0.0]
    base = musa.zeros(2, 3)
    musa.exp(musa.zeros(2), out=base[:, 1])  # a strided view
    assert base.tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    with pytest.raises(TypeError, match=r"\[exp\] result type float32 can't be cast to the "
                                        r"output type int64"):
        musa.exp(musa.tensor([1, 2]), out=musa.tensor([0, 0]))
    with pytest.raises(ValueError, match=r"\[mul\] output has shape \(3,\) but the result has "
                                         r"shape \(2,\)"):
        musa.mul(x, y, out=musa.empty(3))
    with pytest.raises(TypeError, match=r"\[neg\].*out"):
        musa.neg(x, out=[1.0, 2.0])


def test_inplace_methods_of_generated_ops_write_into_self():
    base = musa.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
    v = base[:, 1]  # a view: the write reaches base
    assert v.relu_() is v
    assert base.tolist() == [[1.0, 0.0, 3.0], [-4.0, 5.0, -6.0]]
    ptr = base.data_ptr()
    assert base.mul_(2) is base and base.data_ptr() == ptr
    assert base.tolist() == [[2.0, 0.0, 6.0], [-8.0, 10.0, -12.0]]
    # autograd through an in-place op: as the out-of-place op
    a = musa.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = a * 3
    y.exp_()
    y.sum().backward()
    assert musa.allclose(a.grad, 3 * (a.detach() * 3).exp())
    with pytest.raises(RuntimeError, match="leaf"):
        a.exp_()
    # the result must fit self's dtype, as in PyTorch
    with pytest.raises(TypeError, match="can't be cast"):
        musa.tensor([4, 9]).sqrt_()


def test_the_namespace_is_the_registry_of_exports():
    exports = _C._exports
    assert list(exports) == sorted(exports) and len(set(exports)) == len(exports)
    assert all(not n.startswith("_") for n in exports)
    assert all(hasattr(musa, n) for n in exports)
    # bound for musa.nn.functional (PM_NOEXPORT): in _C, not in musa
    for name in ("gelu", "mse_loss", "cast"):
        assert name in vars(_C) and name not in exports and not hasattr(musa, name)
    # musa.conv2d is torch.conv2d's spelling of F.conv2d (musa/_torch_nn_names.py), not the binding
    assert "conv2d" in vars(_C) and "conv2d" not in exports and musa.conv2d is not _C.conv2d


def test_hand_written_functions_take_out_too():
    x = musa.tensor([[3.0, -1.0], [0.5, 2.0]])
    o = musa.empty(2, 2)
    assert musa.add(x, x, alpha=2, out=o) is o and o.tolist() == (x * 3).tolist()
    assert musa.add(x, o, out=o) is o and o.tolist() == (x * 4).tolist()  # out is an input
    assert musa.cat([x, x], dim=1, out=musa.empty(2, 4)).tolist() == musa.cat([x, x], 1).tolist()
    assert musa.sum(x, out=musa.empty(())).item() == 4.5
    assert musa.where(x > 0, x, 0.0, out=o).tolist() == [[3.0, 0.0], [0.5, 2.0]]
    # tuple results: a tuple of outs, returned with the result's names
    v, i = musa.empty(2), musa.empty(2, dtype=musa.int64)
    r = musa.max(x, 1, out=(v, i))
    assert r.values is v and r.indices is i and type(r) is type(musa.max(x, 1))
    assert v.tolist() == [3.0, 2.0] and i.tolist() == [0, 1]
    assert musa.sort(x, out=[musa.empty(2, 2), musa.empty(2, 2, dtype=musa.int64)])[1].tolist() \
        == [[1, 0], [0, 1]]
    # factories: made in out's dtype
    z = musa.empty(3, dtype=musa.int64)
    assert musa.arange(3, out=z) is z and z.tolist() == [0, 1, 2] and z.dtype is musa.int64
    # an empty out is resized (PyTorch's torch.empty(0) idiom), here and in generated ops
    e = musa.empty(0)
    assert musa.cumsum(x, 0, out=e) is e and e.tolist() == [[3.0, -1.0], [3.5, 1.0]]
    e = musa.empty(0, dtype=musa.float64)
    assert musa.exp(musa.zeros(3), out=e) is e and e.tolist() == [1.0] * 3
    assert e.dtype is musa.float64
    # autograd: the write records history as copy_ does
    a = musa.tensor([1.0, 2.0], requires_grad=True)
    musa.sum(a * a, 0, out=musa.empty(())).backward()
    assert a.grad.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match=r"\[cat\] out is a leaf tensor that requires grad"):
        musa.cat([x], out=musa.empty(0, requires_grad=True))
    with pytest.raises(ValueError, match=r"\[sum\] output has shape \(3,\) but the result has "
                                         r"shape \(2,\)"):
        musa.sum(x, 1, out=musa.empty(3))
    with pytest.raises(TypeError, match=r"\[amax\] result type float32 can't be cast to the "
                                        r"output type int64"):
        musa.amax(x, 0, out=musa.empty(2, dtype=musa.int64))
    with pytest.raises(ValueError, match=r"\[add\] cannot write into a tensor whose elements "
                                         r"overlap"):
        musa.add(x, x, out=musa.zeros(1, 2).expand(2, 2))
    with pytest.raises(TypeError, match=r"\[max\] out must be a tuple of 2 tensors"):
        musa.max(x, 1, out=v)
    with pytest.raises(TypeError, match=r"\[sub\] out must be a Tensor, got list"):
        musa.sub(x, x, out=[1.0])
    with pytest.raises(TypeError, match=r"\[add\] got an unexpected keyword argument 'out'"):
        x.add(x, out=o)  # methods take none, as in PyTorch
    with pytest.raises(TypeError, match=r"\[reshape\] got an unexpected keyword argument 'out'"):
        musa.reshape(x, (4,), out=musa.empty(4))  # nor views


def test_functions_written_in_python_take_out():
    x = musa.tensor([[2.0, -1.0], [0.5, 3.0]])
    o = musa.empty(2, 2)
    assert musa.mm(x, x, out=o) is o and o.tolist() == (x @ x).tolist()  # matmul writes it
    assert musa.addmm(x, x, x, beta=2, out=o) is o and o.tolist() == (2 * x + x @ x).tolist()
    e = musa.empty(0)
    assert musa.hstack([x, x], out=e) is e and e.shape == (2, 4)
    assert musa.quantile(x, 0.5, dim=1, out=musa.empty(2)).tolist() == [0.5, 1.75]
    v, i = musa.empty(0), musa.empty(0, dtype=musa.int64)
    r = musa.median(x, 0, out=(v, i))  # a namedtuple result: its type and names kept
    assert r.values is v and r.indices is i and type(r) is type(musa.median(x, 0))
    assert v.tolist() == [0.5, -1.0] and i.tolist() == [1, 0]
    # random factories draw in out's dtype, with generator= too
    d = musa.empty(4, dtype=musa.float64)
    g = musa.Generator().manual_seed(7)
    assert musa.rand(4, generator=g, out=d) is d and d.dtype is musa.float64
    assert d.tolist() == musa.rand(4, generator=musa.Generator().manual_seed(7),
                                   dtype=musa.float64).tolist()
    p = musa.empty(0, dtype=musa.int64)
    assert sorted(musa.randperm(5, out=p).tolist()) == [0, 1, 2, 3, 4] and p.dtype is musa.int64
    with pytest.raises(ValueError, match=r"\[addmm\] output has shape \(3,\) but the result has "
                                         r"shape \(2, 2\)"):
        musa.addmm(x, x, x, out=musa.empty(3))
    with pytest.raises(TypeError, match=r"\[median\] out must be a tuple of 2 tensors"):
        musa.median(x, 0, out=v)
    with pytest.raises(TypeError, match=r"\[addmv\] result type float32 can't be cast to the "
                                        r"output type int64"):
        musa.addmv(x[0], x, x[0], out=musa.empty(2, dtype=musa.int64))


def test_into_out_rejects_results_it_cannot_write():
    o = musa.empty(1)
    with pytest.raises(TypeError, match=r"\[f\] out= needs tensor results, but result 1 is a int"):
        _C._into_out("f", (musa.ones(1), 3), (o, musa.empty(1)))
    with pytest.raises(TypeError, match=r"\[f\] got an unexpected keyword argument 'out'"):
        _C._into_out("f", 3, o)
    with pytest.raises(TypeError, match=r"\[_into_out\] who must be a str"):
        _C._into_out(3, musa.ones(1), o)
    assert _C._into_out("f", 3, None) == 3  # no out: the result as it is
