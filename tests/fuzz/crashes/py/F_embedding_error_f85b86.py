"""F.embedding: error

message does not start with [name]: TypeError: '<=' not supported between instances of 'int' and 'li

Found by tests/fuzz/fuzz_py.py (batch seed 5039, call 120); replayed by
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
    a0 = musa.zeros((1, 0, 4), dtype=musa.bool).expand(6, 0, 4)
    a1 = musa.tensor([[inf, -3.923, 65504.0], [-1.48, -1.279, -1.775], [0.09, 1e-40, 3e38]], dtype=musa.float32)
    a2 = [[1], [2, 3]]
    a3 = None
    a4 = False
    out = F.embedding(a0, a1, a2, a3, scale_grad_by_freq=a4)

check(call_0)
