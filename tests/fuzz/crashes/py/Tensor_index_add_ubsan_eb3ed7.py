"""Tensor.index_add: ubsan

runtime error: member access within null pointer of type 'struct musa_tensor'
/work/wt-pyfuzz/src/ops/dispatch.c:73:21: runtime error: member access within null pointer of type '
    #0 0x7fc59bed1d27 in musa_result_type /work/wt-pyfuzz/src/ops/dispatch.c:73
    #1 0x7fc59bdea9ca in scaled /work/wt-pyfuzz/python/musa/_C/ops.c:259
    #2 0x7fc59bdf6cd5 in body_index_add /work/wt-pyfuzz/python/musa/_C/ops.c:658
    #3 0x7fc59bdc1657 in pm_call /work/wt-pyfuzz/python/musa/_C/bind.c:292

Found by tests/fuzz/fuzz_py.py (batch seed 908, call 86); replayed by
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
    a0 = musa.tensor([0.143, inf, 0.0, 3e38], dtype=musa.float16).requires_grad_()
    a1 = 1
    a2 = musa.tensor([1, 3], dtype=musa.int64)
    a3 = None
    a4 = 0
    out = a0.index_add(a1, a2, a3, alpha=a4)

check(call_0)
