"""F.lp_pool2d: error

message does not start with [name]: ZeroDivisionError: float division by zero

Found by tests/fuzz/fuzz_py.py (batch seed 912, call 46); replayed by
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
    a0 = musa.tensor([[[-2.091, 3.453, 2.739], [-1.414, -1.865, -1.501], [-2.204, 0.926, -0.464]], [[-2.117, 1.683, -1.466], [-0.403, 1.847, -1.644], [0.561, 0.438, 2.403]], [[1.601, 1.508, 1.478], [-0.758, 2.159, 1.032], [-0.602, -2.848, 1.129]], [[3.568, 0.774, -2.077], [2.632, 0.887, 2.807], [-1.023, 2.34, -0.635]], [[-0.061, -1.96, 3.512], [1.283, 1.971, 2.176], [-0.597, -3.132, -2.111]], [[-2.384, 1.41, 2.937], [0.776, -3.874, 1.109], [-3.276, 3.337, -1.245]]], dtype=musa.float16)
    a1 = 0
    a2 = (1, 1,)
    out = F.lp_pool2d(a0, a1, a2)

check(call_0)
