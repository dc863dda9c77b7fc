"""Tensor.set_: error

AttributeError is not a standard exception class: AttributeError: 'tuple' object has no attribute 'd

Found by tests/fuzz/fuzz_py.py (batch seed 8627, call 79); replayed by
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
    a0 = musa.tensor([[[[-3.83, -1.003, -2.17, -3.992, -1.441, -1.707]], [[1.741, 3.564, -0.274, 1.35, -3.772, -2.933]], [[-3.463, -0.383, 1.999, -1.772, 1.087, -3.983]]]], dtype=musa.float16)
    a1 = (2, )
    a2 = 0
    a3 = (1, 3, 1, 6)
    a4 = (2,)
    out = a0.set_(source=a1, storage_offset=a2, size=a3, stride=a4)

check(call_0)
