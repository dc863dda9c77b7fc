"""F.multi_head_attention_forward: error

message does not start with [name]: TypeError: '<=' not supported between instances of 'musa.dtype' 

Found by tests/fuzz/fuzz_py.py (batch seed 10027, call 171); replayed by
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
    a0 = musa.tensor([[[[-2, -6, -4], [3, -1, 0], [3, 6, -4], [6, 3, -3], [3, 0, 3]]], [[[-6, -4, 6], [0, -5, 4], [-4, -6, -2], [-5, -2, 0], [-3, 5, 0]]], [[[-6, -5, 6], [2, 3, 4], [-3, 0, -6], [3, 6, -4], [6, 5, 6]]]], dtype=musa.int8).expand(3, 6, 5, 3)
    a1 = 2**62
    a2 = (musa.arange(270) % 7).to(musa.int64).reshape((3, 6, 5, 3))
    a3 = 1
    a4 = musa.float16
    a5 = musa.tensor([[[[-0.0, 2.25]]], [[[-1.668, 0.0]]], [[[1.07, 1.222]]]], dtype=musa.float64)[:, :, :, ::2]
    a6 = musa.tensor([0.014], dtype=musa.float64)[1:]
    a7 = (musa.arange(270, dtype=musa.float64) * 0.022222222222222223 - 3).to(musa.float64).reshape((3, 6, 5, 3))
    a8 = ...
    a9 = (musa.arange(270) % 3 == 0).reshape((3, 6, 5, 3))
    a10 = 0.93
    a11 = ...
    a12 = ''
    a13 = True
    a14 = slice(None)
    a15 = (musa.arange(270, dtype=musa.float64) * 0.022222222222222223 - 3).to(musa.float64).reshape((3, 6, 5, 3))
    a16 = (musa.arange(270, dtype=musa.float64) * 0.022222222222222223 - 3).to(musa.float64).reshape((3, 6, 5, 3))
    out = F.multi_head_attention_forward(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, training=a13, key_padding_mask=a14, k_proj_weight=a15, v_proj_weight=a16)

check(call_0)
