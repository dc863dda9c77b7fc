"""musa.unbind: error

AttributeError is not a standard exception class: AttributeError: 'int' object has no attribute 'sha

Found by tests/fuzz/fuzz_py.py (batch seed 102, call 15); replayed by
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
    a0 = 2
    a1 = musa.tensor([[3.489, 3.82, 1.995, -2.376, -0.48, -1.327], [3.159, 1.113, -3.764, 2.363, 0.99, 3.394], [2.942, -0.562, 0.984, 3.584, 3.69, -1.617], [1.883, -0.339, -3.882, -0.054, 3.445, 2.727]], dtype=musa.float32)[1:]
    out = musa.unbind(a0, a1)

check(call_0)
