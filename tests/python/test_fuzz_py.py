"""The Python fuzzer itself (tests/fuzz/fuzz_py.py): its calls are a pure
function of (seed, index), it runs a batch end to end, and it judges
exceptions as documented. The fuzzing proper runs in `bash run.sh sanitize`
(under ASan) and `bash run.sh fuzz-py`."""
import os
import subprocess
import sys

import pytest

FUZZ = os.path.join(os.path.dirname(__file__), "..", "fuzz")
sys.path.insert(0, FUZZ)

from pyfuzz.api import api  # noqa: E402
from pyfuzz.check import classify  # noqa: E402
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


def test_a_batch_runs_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(FUZZ, "..", "..", "python"), OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(FUZZ, "fuzz_py.py"), "--seed", "3", "--batches", "1",
                        "--calls", "40", "--no-torch", "--out", str(tmp_path), "--crash-dir", str(tmp_path / "c")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "fuzz-py: 40 calls" in p.stdout and (tmp_path / "findings.jsonl").exists()
