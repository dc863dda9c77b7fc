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
