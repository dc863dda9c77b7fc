"""F.max_pool2d: ubsan

runtime error: signed integer overflow: 4611686018427387904 * 2 cannot be represented in type 'long 
/work/wt-pyfuzz/src/ops/infer_nn.c:169:11: runtime error: signed integer overflow: 46116860184273879
    #0 0x7fc5ea113320 in pool_out /work/wt-pyfuzz/src/ops/infer_nn.c:169
    #1 0x7fc5ea1149dc in infer_pool2d /work/wt-pyfuzz/src/ops/infer_nn.c:219
    #2 0x7fc5ea0cdaf2 in musa_dispatch /work/wt-pyfuzz/src/ops/dispatch.c:219
    #3 0x7fc5ea141ccf in musa_max_pool2d /work/wt-pyfuzz/src/ops/nn.c:164

Found by tests/fuzz/fuzz_py.py (batch seed 226, call 105); replayed by
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
    a0 = musa.tensor([[[2.222, 2.35, -1.928, 1.49], [-0.283, 1.761, 3.106, -1.777], [3.266, 2.806, -1.828, -1.452]], [[-3.244, -3.078, -3.846, -2.417], [2.782, 1.15, -1.321, 1.339], [3.408, -1.635, -2.226, -3.077]], [[1.568, 1.6, 2.89, -3.724], [-0.017, -1.593, -2.468, -1.071], [3.703, -1.873, -2.036, -0.308]]], dtype=musa.float64)[1:]
    a1 = (2, 2,)
    a2 = 2
    a3 = 2**62
    out = F.max_pool2d(a0, a1, a2, padding=a3)

check(call_0)
