"""The Python fuzzer itself (tests/fuzz/fuzz_py.py): its calls are a pure
function of (seed, index), it runs a batch end to end, and it judges
exceptions as documented. The fuzzing proper runs in `bash run.sh sanitize`
(under ASan) and `bash run.sh fuzz-py`."""
import os
import subprocess
import sys
import types

import pytest

FUZZ = os.path.join(os.path.dirname(__file__), "..", "fuzz")
sys.path.insert(0, FUZZ)

from pyfuzz.api import api  # noqa: E402
from pyfuzz.check import (classify, compare, ill_conditioned, run_source,  # noqa: E402
                           torch_wrong, unsafe_conversion)
from pyfuzz.gen import generate  # noqa: E402


def test_calls_depend_on_the_seed_alone():
    targets = api()
    a = [generate(targets, 7, i).source() for i in range(50)]
    assert a == [generate(api(), 7, i).source() for i in range(50)]
    assert a != [generate(targets, 8, i).source() for i in range(50)]
    # every call compiles as Python (slices and all)
    for s in a:
        compile(s, "<call>", "exec")


def test_every_kind_of_target_is_there():
    names = {t.name for t in api()}
    for n in ("musa.add", "F.conv2d", "Tensor.view", "Tensor.__add__", "Tensor.__getitem__",
              "Tensor.shape", "Tensor.grad="):
        assert n in names
    assert "musa.manual_seed" not in names and "Tensor.register_hook" not in names


@pytest.mark.parametrize("exc,form,finding", [
    (ValueError("[add] shapes differ"), "fn", False),
    (TypeError("add() takes 2 positional arguments but 3 were given"), "fn", False),
    (TypeError("unsupported operand type(s) for &: 'musa.Tensor' and 'list'"), "binop", False),
    (TypeError("unsupported operand type(s) for &: 'musa.Tensor' and 'list'"), "fn", True),
    (AttributeError("'int' object has no attribute 'shape'"), "fn", True),
    (SystemError("error return without exception set"), "fn", True),
    (IndexError("tuple index out of range"), "fn", True),
])
def test_exceptions_are_judged_as_documented(exc, form, finding):
    assert (classify(exc, form, "musa.x") is not None) == finding



def test_ill_conditioned_inputs_are_told_apart():
    import musa
    # rows of an arithmetic progression: rank 2, the sign of det is noise
    sing = musa.arange(25, dtype=musa.float32).reshape(5, 5)
    well = musa.eye(5) * 2 + musa.ones(5, 5) * 0.1
    assert ill_conditioned("slogdet", {"a0": sing}, musa)
    assert ill_conditioned("det", {"a0": sing.reshape(1, 5, 5).expand(3, 5, 5)}, musa)
    assert not ill_conditioned("slogdet", {"a0": well}, musa)
    assert not ill_conditioned("slogdet", {"a0": musa.zeros(2, 3)}, musa)  # not square
    assert not ill_conditioned("add", {"a0": sing}, musa)
    # a tiny eps: below 1e-8 in float32, below 1e-5 in half precision
    x = musa.ones(2, 3, 4)
    assert ill_conditioned("group_norm", {"a0": x, "a1": 1, "a2": 1e-12}, musa)
    assert not ill_conditioned("group_norm", {"a0": x, "a1": 1, "a2": 1e-5}, musa)
    assert ill_conditioned("layer_norm", {"a0": x.to(musa.bfloat16), "a1": 1e-6}, musa)
    assert ill_conditioned("batch_norm", {"a0": x, "a1": -1e-3}, musa)
    # a sum whose terms cancel past float32's precision (seed 6910)
    big = musa.tensor([3.239, -0.212, 3e38, 1.214, -3e38, 0.139])
    assert ill_conditioned("mean", {"a0": big}, musa)
    assert not ill_conditioned("sum", {"a0": big.to(musa.float64) * 1e-30, "a1": 0}, musa)
    assert not ill_conditioned("mean", {"a0": musa.randn(1000) * 100}, musa)
    assert not ill_conditioned("mean", {"a0": musa.tensor([1e30, 1e30])}, musa)  # no cancelling
    assert not ill_conditioned("max", {"a0": big}, musa)



def test_numbers_an_integer_tensor_cannot_hold_are_unsafe():
    import musa
    a = musa.tensor([[6], [-6]], dtype=musa.int32)
    # fuzz-py seed 5661: a0.copy_(nan) gives 0 in musa, INT_MIN in PyTorch
    for v in (float("nan"), float("inf"), 3e9):
        assert unsafe_conversion({"a0": a, "a1": v}, musa), v
    assert not unsafe_conversion({"a0": a, "a1": 2.5}, musa)
    assert not unsafe_conversion({"a0": a.float(), "a1": float("nan")}, musa)



def test_pytorch_bugs_are_not_compared():
    import musa
    x = musa.tensor(2, dtype=musa.uint8)
    assert torch_wrong("aminmax", {"a0": x, "a1": 0, "a2": True})  # seed 5834
    assert not torch_wrong("aminmax", {"a0": x.reshape(1), "a1": 0, "a2": True})
    assert torch_wrong("median", {"a0": musa.ones(1).expand(3)})
    assert not torch_wrong("median", {"a0": musa.ones(3)})
    assert torch_wrong("nanmedian", {"a0": musa.ones(1, dtype=musa.bfloat16).expand(2)})
    assert not torch_wrong("nanmedian", {"a0": musa.ones(2, dtype=musa.bfloat16)})
    nan = float("nan")
    assert torch_wrong("histc", {"a0": musa.tensor([nan, 0.2]), "a1": True})  # seed 6077
    assert torch_wrong("histc", {"a0": musa.ones(3, dtype=musa.bfloat16)})
    assert not torch_wrong("histc", {"a0": musa.tensor([float("inf"), 0.2])})
    # seed 7562: PyTorch 1.13 masks shift counts; in-width counts are compared
    a, c = musa.tensor([-3, 6], dtype=musa.int32), musa.tensor([5, -1], dtype=musa.int32)
    for src in ("out = a0.bitwise_left_shift_(a1)", "out = a0 << a1", "a0 >>= a1\nout = a0"):
        assert torch_wrong("__lshift__", {"a0": a, "a1": c, "out": a << c}, src)
        assert not torch_wrong("__lshift__", {"a0": a, "a1": c.abs(), "out": a << c.abs()}, src)
    assert torch_wrong("__rshift__", {"a0": a, "a1": 40, "out": a >> 40}, "out = a0 >> a1")
    assert not torch_wrong("__rshift__", {"a0": a, "a1": 31, "out": a >> 31}, "out = a0 >> a1")
    assert torch_wrong("__lshift__", {"a0": a, "a1": 1, "out": 1 << a}, "out = a1 << a0")
    # seed 11868: 1.13's float32 batch_norm variance overflows where the squares do
    x = musa.tensor([[[-3e38], [3.3]], [[2.5], [-3.0]]], dtype=musa.bfloat16)
    assert torch_wrong("batch_norm", {"a0": x, "a1": musa.zeros(2), "a5": True})
    assert not torch_wrong("batch_norm", {"a0": x.clamp(-1e19, 1e19), "a1": musa.zeros(2)})
    # seed 12423: 1.13 normalizes a row of one element to a nonzero value
    x, src = musa.tensor([[[1.524]]], dtype=musa.bfloat16), "out = musa.layer_norm(a0, a1)"
    assert torch_wrong("layer_norm", {"a0": x, "a1": (1,)}, src)
    assert torch_wrong("layer_norm", {"a0": x, "a1": 1}, src)
    assert not torch_wrong("layer_norm", {"a0": x.expand(1, 1, 2), "a1": (2,)}, src)
    assert not torch_wrong("layer_norm", {"a0": x.expand(1, 2, 1), "a1": (2, 1)}, src)
    # seed 13546: an in-place call's conditions read its arguments as they were (igamma_
    # wrote its result over the subnormal a)
    a = musa.tensor([0.5, 1e-40, 2.0], dtype=musa.bfloat16)
    call = types.SimpleNamespace(target=types.SimpleNamespace(short="igamma_"), lines=[],
                                 call="out = a0.igamma_(a1)")
    env, exc, stage = run_source(call, {"a0": a, "a1": musa.tensor([0.3, 0.313, 1.0])})
    assert stage == "ok" and not (a.float().abs() < 1e-38).any()
    assert torch_wrong("igamma_", env, call.call)
    # seed 13542: 1.13's narrow_copy reads a non-contiguous input in memory order
    x = musa.arange(40.0).reshape(2, 4, 5).transpose(0, 1)
    assert torch_wrong("narrow_copy", {"a0": x, "a1": 1, "a2": 0, "a3": 2})
    assert not torch_wrong("narrow_copy", {"a0": x.contiguous(), "a1": 1, "a2": 0, "a3": 2})
    assert float(musa.narrow_copy(x, 1, 0, 2)[0, 1, 0]) == 20.0
    # seed 14043: 1.13's gcd with the type's minimum among the values is negative
    a, b = musa.tensor([-5], dtype=musa.int8), musa.tensor([0, -128, 0], dtype=musa.int8)
    assert torch_wrong("gcd", {"a0": a, "a1": b})
    assert not torch_wrong("gcd", {"a0": a, "a1": b + 1})
    assert musa.gcd(a, b).tolist() == [5, 1, 5]
    # seeds 23522, 23557: softmin negates in the input's integer type before the cast
    a = musa.tensor([127, -128], dtype=musa.int8)
    assert torch_wrong("softmin", {"a0": a, "a1": musa.float64})
    assert torch_wrong("softmin", {"a0": musa.tensor([5, 1], dtype=musa.uint8)})
    assert not torch_wrong("softmin", {"a0": musa.tensor([127, -127], dtype=musa.int8)})
    assert musa.equal(musa.nn.functional.softmin(a, 0, dtype=musa.float64),
                      musa.softmax(-a.double(), 0))
    # seed 13393: and groups of one element, in float32 too (musa: exactly 0)
    x, src = musa.tensor([[[-3.925], [-1.782], [-2.464]]]), "out = F.group_norm(a0, a1, a2, a3)"
    assert torch_wrong("group_norm", {"a0": x, "a1": 3}, src)
    assert not torch_wrong("group_norm", {"a0": x, "a1": 1}, src)
    assert not torch_wrong("group_norm", {"a0": x.expand(1, 3, 2).contiguous(), "a1": 3}, src)
    assert musa.equal(musa.nn.functional.group_norm(x, 3, musa.tensor([-2.055, -1.3, -0.9])),
                      musa.zeros(1, 3, 1))



def test_a_dtype_musa_lacks_is_a_dtype_difference():
    import musa
    torch = pytest.importorskip("torch")
    # seed 6371 (when musa had no int16): a torch dtype musa lacks
    assert compare(musa.float32, torch.complex64, musa, torch).startswith("dtype: ")
    # a dtype both have stays a wrong value (seed 5317's int8 against int32)
    assert compare(musa.int32, torch.int8, musa, torch) == "out: musa.int32 vs torch torch.int8"
    assert compare(musa.int8, torch.int8, musa, torch) is None


def test_a_batch_runs_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(FUZZ, "..", "..", "python"), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(FUZZ, "fuzz_py.py"), "--seed", "3", "--batches", "1",
                        "--calls", "40", "--no-torch", "--out", str(tmp_path), "--crash-dir", str(tmp_path / "c")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "fuzz-py: 40 calls" in p.stdout and (tmp_path / "findings.jsonl").exists()
