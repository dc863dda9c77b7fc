"""The op table as Python sees it: every row of src/ops/ops.def is bound as
its `py` column says (musa._C._op_table() lists the rows), and the musa
namespace holds the functions _C registers for it (_C._exports)."""
import musa
from musa import _C

# the spec a generated binding gets from the row's fn column (_C/ops.c)
GENERATED_SPEC = {"unary": "input:T", "binary": "input:S other:S"}


def _problems(name, fn, py):
    in_c = name in vars(_C)
    method = hasattr(musa.Tensor, name)
    if py == "gen":
        if fn not in GENERATED_SPEC:
            return f"py gen, but fn {fn} has no generated binding"
        spec = GENERATED_SPEC[fn]
        if not (in_c and getattr(_C, name).__doc__ == spec):
            return f"py gen, but _C.{name} is not the generated binding '{spec}'"
        if not (method and getattr(musa.Tensor, name).__doc__ == spec):
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


def test_the_namespace_is_the_registry_of_exports():
    exports = _C._exports
    assert list(exports) == sorted(exports) and len(set(exports)) == len(exports)
    assert all(not n.startswith("_") for n in exports)
    assert all(hasattr(musa, n) for n in exports)
    # bound for musa.nn.functional (PM_NOEXPORT): in _C, not in musa
    for name in ("conv2d", "gelu", "mse_loss", "cast"):
        assert name in vars(_C) and name not in exports and not hasattr(musa, name)
