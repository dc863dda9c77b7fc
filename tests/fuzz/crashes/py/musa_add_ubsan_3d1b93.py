"""musa.add: ubsan

runtime error: member access within null pointer of type 'struct musa_tensor'
/tmp/ci/src/ops/dispatch.c:76:21: runtime error: member access within null pointer of type 'struct m
    #0 0x7f045a2cfe06 in musa_result_type /tmp/ci/src/ops/dispatch.c:76
    #1 0x7f045a108a20 in scaled /tmp/ci/python/musa/_C/ops.c:259
    #2 0x7f045a108eec in body_add /tmp/ci/python/musa/_C/ops.c:268
    #3 0x7f045a0cb84b in pm_call /tmp/ci/python/musa/_C/bind.c:310

Found by tests/fuzz/fuzz_py.py (batch seed 1038, call 61); replayed by
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
    a0 = None
    a1 = musa.zeros((0, 3, 2), dtype=musa.float32)
    a2 = 2
    out = musa.add(a0, a1, alpha=a2)

check(call_0)
