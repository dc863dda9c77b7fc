"""F.multi_head_attention_forward: error

AttributeError is not a standard exception class: AttributeError: 'float' object has no attribute 'n

Found by tests/fuzz/fuzz_py.py (batch seed 17041, call 104); replayed by
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
    a0 = 1.5
    a1 = musa.zeros((0, 3, 1), dtype=musa.float16)
    a2 = -1
    a3 = -2**63 - 1
    a4 = True
    a5 = musa.tensor(-2.547, dtype=musa.float16)
    a6 = musa.tensor([-2.232, 2.282, -0.546], dtype=musa.float32)
    a7 = ...
    a8 = 1
    a9 = 2**62
    a10 = 1
    a11 = 2**63
    a12 = 2**62
    a13 = 'x'
    a14 = musa.tensor([[[3.557, 1.673, 3e38], [-3.821, 0.468, nan]], [[-3e38, 3e38, 3.089], [-2.549, 2.707, 3e38]], [[1.171, 2.646, 0.0], [-3.398, 0.609, -inf]], [[3.533, -inf, inf], [inf, 0.385, -3.415]]], dtype=musa.float16).transpose(0, 1)
    a15 = musa.tensor([3, 0, 0], dtype=musa.uint8)
    out = F.multi_head_attention_forward(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, key_padding_mask=a13, need_weights=a14, k_proj_weight=a15)

check(call_0)
