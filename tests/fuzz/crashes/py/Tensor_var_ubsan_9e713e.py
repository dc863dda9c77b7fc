"""Tensor.var: ubsan

runtime error: signed integer overflow: 2199023255552 * 2199023255552 cannot be represented in type 
/work/wt-pyfuzz/src/ops/composite.c:109:11: runtime error: signed integer overflow: 2199023255552 * 
    #0 0x7faf24acbca6 in reduced_count /work/wt-pyfuzz/src/ops/composite.c:109
    #1 0x7faf24acc18a in musa_var /work/wt-pyfuzz/src/ops/composite.c:128
    #2 0x7faf249efb68 in body_var /work/wt-pyfuzz/python/musa/_C/ops.c:427
    #3 0x7faf249c1657 in pm_call /work/wt-pyfuzz/python/musa/_C/bind.c:292

Found by tests/fuzz/fuzz_py.py (batch seed 976, call 28); replayed by
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
    a0 = musa.full((1,), 0, dtype=musa.float16).expand(2199023255552,)
    a1 = (-1, 0, )
    a2 = False
    out = a0.var(dim=a1, keepdim=a2)

check(call_0)
