"""F.triplet_margin_with_distance_loss: error

message does not start with [name]: TypeError: 'int' object is not callable

Found by tests/fuzz/fuzz_py.py (batch seed 2049, call 131); replayed by
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
    a0 = musa.tensor([[4, 5, -4], [-2, -5, 3], [-6, 6, 1], [-2, 0, 2]], dtype=musa.int32)[1:]
    a1 = musa.full((1,), 2, dtype=musa.int8).expand(4611686018427387904,)
    a2 = musa.tensor([[127, 4, -3], [0, 0, 4], [6, -1, -5]], dtype=musa.int8)
    a3 = -2**70
    a4 = musa.tensor([[6]], dtype=musa.int8)
    out = F.triplet_margin_with_distance_loss(a0, a1, a2, distance_function=a3, swap=a4)

check(call_0)
