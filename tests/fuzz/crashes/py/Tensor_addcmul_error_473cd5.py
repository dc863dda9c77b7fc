"""Tensor.addcmul_: error

message does not start with [name]: OverflowError: cannot convert float infinity to integer

Found by tests/fuzz/fuzz_py.py (batch seed 3313, call 175); replayed by
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
    a0 = musa.tensor([[[[True, False, True, False, False]], [[True, True, False, False, True]]], [[[False, False, False, False, False]], [[False, True, False, True, False]]], [[[True, True, True, False, True]], [[False, False, False, True, False]]]], dtype=musa.bool)
    a1 = musa.full((1, 1), 1, dtype=musa.bool).expand(1048576, 1048576)
    a2 = musa.tensor([[True, True, True, True], [True, False, False, False]], dtype=musa.bool)[:, ::2]
    a3 = -inf
    out = a0.addcmul_(a1, a2, value=a3)

check(call_0)
