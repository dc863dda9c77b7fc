"""musa.ctc_loss: error

message does not start with [name]: ValueError: invalid literal for int() with base 10: 'x'

Found by tests/fuzz/fuzz_py.py (batch seed 21010, call 178); replayed by
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
PYTHON_OWN = re.compile("(takes|expected) .*(positional )?arguments?|got an unexpected keyword argument|missing \\d+ required|got multiple values for|takes no (keyword )?arguments|takes exactly one argument|argument after \\* must be|must be a mapping|unsupported operand type|not supported between instances of|bad operand type for|unsupported format string passed to|Unknown format code|can only concatenate (tuple|list|str)|can't multiply sequence by non-int")  # Python's own argument and operator errors


def check(call):
    try:
        call()
    except STANDARD as e:
        print(f"{type(e).__name__}: {e}")
        if not str(e).startswith("[") and not PYTHON_OWN.search(str(e)):
            raise


def call_0():
    a0 = musa.tensor([[-3.403, 0.896], [-2.553, 3.518]], dtype=musa.float16)
    a1 = musa.tensor(-3.916, dtype=musa.float16)
    a2 = 'x'
    a3 = musa.tensor([[-0.236, -1.555], [-2.413, 3.213]], dtype=musa.float16)
    a4 = 'none'
    out = musa.ctc_loss(a0, a1, a2, a3, reduction=a4)

check(call_0)
