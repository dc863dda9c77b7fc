"""musa.index_add: ubsan

runtime error: member access within null pointer of type 'struct musa_tensor'
/work/wt-pyfuzz/src/ops/dispatch.c:73:21: runtime error: member access within null pointer of type '
    #0 0x7f112d2d1d27 in musa_result_type /work/wt-pyfuzz/src/ops/dispatch.c:73
    #1 0x7f112d1ea9ca in scaled /work/wt-pyfuzz/python/musa/_C/ops.c:259
    #2 0x7f112d1f6cd5 in body_index_add /work/wt-pyfuzz/python/musa/_C/ops.c:658
    #3 0x7f112d1c1657 in pm_call /work/wt-pyfuzz/python/musa/_C/bind.c:292

Found by tests/fuzz/fuzz_py.py (batch seed 990, call 30); replayed by
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
    a0 = musa.tensor([65504.0, -2.041, -3e38, 0.008, -3.366, -0.172], dtype=musa.float64)
    a1 = 1
    a2 = musa.tensor([False, True, True, False, False, True], dtype=musa.bool)
    a3 = None
    a4 = 1e308
    out = musa.index_add(a0, a1, a2, a3, alpha=a4)

check(call_0)
