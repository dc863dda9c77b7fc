"""F.upsample_nearest: error

message does not start with [name]: OverflowError: cannot convert float infinity to integer

Found by tests/fuzz/fuzz_py.py (batch seed 4192, call 40); replayed by
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
PYTHON_OWN = re.compile("(takes|expected) .*(positional )?arguments?|got an unexpected keyword argument|missing \\d+ required|got multiple values for|takes no (keyword )?arguments|takes exactly one argument|argument after \\* must be|must be a mapping|unsupported operand type|not supported between instances of|bad operand type for|unsupported format string passed to|Unknown format code|can only concatenate (tuple|list)|can't multiply sequence by non-int")  # Python's own argument and operator errors


def check(call):
    try:
        call()
    except STANDARD as e:
        print(f"{type(e).__name__}: {e}")
        if not str(e).startswith("[") and not PYTHON_OWN.search(str(e)):
            raise


def call_0():
    a0 = musa.tensor([[[[0.002, 3.378, -2.802, -1.99, -0.903], [-2.683, 0.249, -3.754, -1.012, -1.353]], [[0.408, 1.026, 1.717, 0.718, -1.597], [-0.349, -1.843, 1.35, 0.538, 2.018]]], [[[-2.41, 3.056, 2.483, 2.485, -0.531], [-1.208, 2.505, 2.009, -1.85, 2.127]], [[-1.852, 1.143, 0.743, -1.664, -2.668], [0.014, -1.391, 1.047, 1.381, 0.646]]], [[[-2.205, 0.122, -3.06, 1.846, -0.192], [-1.973, 3.505, 1.08, -0.566, -3.318]], [[2.493, -0.345, 1.687, -3.323, 3.666], [-3.848, -2.53, -0.554, 1.779, -0.606]]]], dtype=musa.float16)
    a1 = 1e308
    out = F.upsample_nearest(a0, scale_factor=a1)

check(call_0)
