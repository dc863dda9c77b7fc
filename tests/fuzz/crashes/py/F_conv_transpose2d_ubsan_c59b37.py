"""F.conv_transpose2d: ubsan

runtime error: signed integer overflow: -9223372036854775808 * 2 cannot be represented in type 'long
/tmp/fz/src/ops/nn.c:129:46: runtime error: signed integer overflow: -9223372036854775808 * 2 cannot
    #0 0x7f868dccbe1f in musa_conv_transpose2d /tmp/fz/src/ops/nn.c:129
    #1 0x7f868da29976 in body_conv_transpose2d /tmp/fz/python/musa/_C/nn.c:68
    #2 0x7f868d9f9abb in pm_call /tmp/fz/python/musa/_C/bind.c:310
    #3 0x7f868da294b2 in fn_conv_transpose2d /tmp/fz/python/musa/_C/nn.c:61

Found by tests/fuzz/fuzz_py.py (batch seed 8714, call 105); replayed by
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
    a0 = musa.tensor([[[[3.697, 1.838, 3.501, -0.624]]], [[[1.891, -2.712, -0.679, 3.532]]]], dtype=musa.float16)
    a1 = musa.tensor([[[[1.153], [0.209]]], [[[-1.481], [-0.284]]]], dtype=musa.float16)[1:]
    a2 = musa.tensor([0.344], dtype=musa.float16)
    a3 = -2**63
    a4 = (0, 0,)
    a5 = 1
    out = F.conv_transpose2d(a0, a1, a2, padding=a3, output_padding=a4, groups=a5)

check(call_0)
