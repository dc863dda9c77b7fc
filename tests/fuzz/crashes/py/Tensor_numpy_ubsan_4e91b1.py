"""Tensor.numpy: ubsan

runtime error: signed integer overflow: 4611686018427387904 * 4 cannot be represented in type 'long 
/work/wt-pyfuzz/python/musa/_C/interop.c:79:17: runtime error: signed integer overflow: 461168601842
    #0 0x7fa4dabd009f in tensor_getbuffer /work/wt-pyfuzz/python/musa/_C/interop.c:79
    #1 0x5b0f85 in PyMemoryView_FromObject (/usr/bin/python3.11+0x5b0f85)
    #2 0x7fa4def19637  (/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.cpython-311-x86_
    #3 0x7fa4deefffc7  (/usr/lib/python3/dist-packages/numpy/core/_multiarray_umath.cpython-311-x86_

Found by tests/fuzz/fuzz_py.py (batch seed 2284, call 37); replayed by
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
    a0 = musa.full((1, 1), 1, dtype=musa.int32).expand(2147483648, 2147483648)
    out = a0.numpy()

check(call_0)
