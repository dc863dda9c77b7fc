"""musa.select_scatter: error

message does not start with [name]: TypeError: '<' not supported between instances of 'str' and 'int

Found by tests/fuzz/fuzz_py.py (batch seed 1253, call 136); replayed by
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
    a0 = musa.tensor([[[1.649], [0.956], [-2.583], [2.093], [3e38]], [[-inf], [-0.0], [2.212], [-0.785], [0.39]]], dtype=musa.float32)
    a1 = musa.tensor([[[3.758], [-2.659], [-2.911], [-1.968], [-2.259]], [[2.444], [-0.337], [-3.918], [2.85], [-1.012]]], dtype=musa.float32)
    a2 = 1
    a3 = 'x'
    out = musa.select_scatter(a0, a1, a2, a3)

check(call_0)
