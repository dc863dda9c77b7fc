"""F.batch_norm: error

AttributeError is not a standard exception class: AttributeError: 'float' object has no attribute 's

Found by tests/fuzz/fuzz_py.py (batch seed 106, call 130); replayed by
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
    a0 = musa.tensor([[[3.317], [-2.039]]], dtype=musa.float64)
    a1 = musa.tensor([3.046, -1.953], dtype=musa.float64)
    a2 = musa.tensor([-0.334, -1.51], dtype=musa.float64)
    a3 = -2.5
    a4 = None
    a5 = musa.tensor([[[-1, -5, 3, 2], [4, 2, -2, -6], [5, -5, 1, -4], [6, -6, 4, -4]], [[-2, -4, 6, -5], [-2, 5, 0, 3], [0, 2, -2, -2], [-2, -2, -2, 6]], [[-6, 5, 4, -4], [-2, 4, -2, 4], [-1, -4, 6, 2], [0, 4, -4, 2]]], dtype=musa.int32)[1:]
    out = F.batch_norm(a0, a1, a2, weight=a3, bias=a4, training=a5)

check(call_0)
