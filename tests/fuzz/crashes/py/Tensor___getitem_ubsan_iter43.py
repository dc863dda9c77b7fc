"""Tensor.__getitem__: asan

runtime error: signed integer overflow: 2 * 4611686018427387904 cannot be represented in type 'long 
==15085==WARNING: AddressSanitizer failed to allocate 0x10000000000 bytes
==15085==WARNING: AddressSanitizer failed to allocate 0x10000000000 bytes
/work/wt-pyfuzz/src/backend/cpu/iter.c:43:58: runtime error: signed integer overflow: 2 * 4611686018
    #0 0x7f03cd0d5efe in musa_iter_init /work/wt-pyfuzz/src/backend/cpu/iter.c:43
    #1 0x7f03cd0baf6a in musa_cpu_copy /work/wt-pyfuzz/src/backend/cpu/copy.c:58

Found by tests/fuzz/fuzz_py.py (batch seed 757, call 104); replayed by
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
    a0 = musa.tensor([2.283, -1.157], dtype=musa.float16)
    out = a0[2**62:2:2**62]

check(call_0)
