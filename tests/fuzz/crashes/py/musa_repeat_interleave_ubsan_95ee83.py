"""musa.repeat_interleave: ubsan

runtime error: signed integer overflow: 3 * 4611686018427387904 cannot be represented in type 'long 
/work/wt-pyfuzz/src/tensor/tensor.c:39:11: runtime error: signed integer overflow: 3 * 4611686018427
    #0 0x7f82c5f4fcda in musa_contiguous_strides /work/wt-pyfuzz/src/tensor/tensor.c:39
    #1 0x7f82c5f51b0b in tensor_struct /work/wt-pyfuzz/src/tensor/tensor.c:132
    #2 0x7f82c5f52c72 in musa_tensor_view_of /work/wt-pyfuzz/src/tensor/tensor.c:190
    #3 0x7f82c5ecfce0 in musa_dispatch /work/wt-pyfuzz/src/ops/dispatch.c:308

Found by tests/fuzz/fuzz_py.py (batch seed 208, call 163); replayed by
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
    a0 = musa.zeros((3, 0), dtype=musa.uint8)
    a1 = 2**62
    a2 = 1
    out = musa.repeat_interleave(a0, a1, dim=a2)

check(call_0)
