"""musa.ctc_loss: error

message does not start with [name]: TypeError: '<=' not supported between instances of 'int' and 'ob

Found by tests/fuzz/fuzz_py.py (batch seed 9756, call 9); replayed by
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
    a0 = musa.zeros((1, 0, 4), dtype=musa.bfloat16).transpose(0, 1)
    a1 = musa.tensor([[[1.767, 0.486, -1.601, -3.646], [-3.606, -0.362, 1.638, 0.466]], [[3.199, 1.854, 0.424, -0.485], [-0.414, -1.172, -3.455, 1.519]]], dtype=musa.bfloat16)[::2]
    a2 = musa.zeros((5, 0), dtype=musa.bfloat16).transpose(0, 1)
    a3 = musa.tensor([[[1.252], [0.485]]], dtype=musa.bfloat16)
    a4 = object()
    out = musa.ctc_loss(a0, a1, a2, a3, blank=a4)

check(call_0)
