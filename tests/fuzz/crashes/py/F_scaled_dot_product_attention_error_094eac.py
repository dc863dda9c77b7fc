"""F.scaled_dot_product_attention: error

message does not start with [name]: ZeroDivisionError: float division by zero

Found by tests/fuzz/fuzz_py.py (batch seed 764, call 107); replayed by
`bash run.sh sanitize` (fuzz_py.py --replay), which requires it to run without
a crash and to raise, if anything, a standard exception whose message starts
with "[name]".
"""
import copy
import math
import operator
import pickle
import re
from math import inf, nan

import numpy as np

import musa
import musa.nn.functional as F

STANDARD = (TypeError, ValueError, IndexError, RuntimeError, MemoryError, NotImplementedError,
            OverflowError, ZeroDivisionError, BufferError)
PYTHON_OWN = re.compile('(takes|expected) .*(positional )?arguments?|got an unexpected keyword argument|missing \\d+ required|got multiple values for|takes no (keyword )?arguments|takes exactly one argument|argument after \\* must be|must be a mapping|unsupported operand type|not supported between instances of|bad operand type for|unsupported format string passed to|Unknown format code')  # Python's own argument and operator errors


def check(call):
    try:
        call()
    except STANDARD as e:
        print(f"{type(e).__name__}: {e}")
        if not str(e).startswith("[") and not PYTHON_OWN.search(str(e)):
            raise


def call_0():
    a0 = musa.zeros((5, 0, 0), dtype=musa.float16)
    a1 = musa.tensor([[[-0.468, -1.393, -1.746, 1.987], [-2.486, -0.261, 2.214, -0.865], [-1.771, 0.013, 2.26, -2.481]]], dtype=musa.float16)
    a2 = musa.tensor([[[-2.894, -2.031, -0.816, 0.62], [3.599, -3.326, 3.191, -0.575], [2.828, 0.836, 3.302, -2.714]]], dtype=musa.float16)
    a3 = musa.tensor([[-2.693, -2.806, -0.68], [1.391, -1.551, -0.994], [1.128, 1e-40, 0.0]], dtype=musa.float16)
    a4 = 2**70
    out = F.scaled_dot_product_attention(a0, a1, a2, attn_mask=a3, dropout_p=a4)

check(call_0)
