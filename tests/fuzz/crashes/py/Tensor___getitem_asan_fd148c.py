"""Tensor.__getitem__: asan

runtime error: signed integer overflow: 2 * 4611686018427387904 cannot be represented in type 'long 
==16558==WARNING: AddressSanitizer failed to allocate 0x80000000000 bytes
==16558==WARNING: AddressSanitizer failed to allocate 0x80000000000 bytes
/work/wt-pyfuzz/src/ops/infer_shape.c:221:40: runtime error: signed integer overflow: 2 * 4611686018
    #0 0x7f601fb2b2d0 in infer_slice /work/wt-pyfuzz/src/ops/infer_shape.c:221
    #1 0x7f601facdaf2 in musa_dispatch /work/wt-pyfuzz/src/ops/dispatch.c:219

Found by tests/fuzz/fuzz_py.py (batch seed 201, call 92); replayed by
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
    a0 = musa.tensor([[[0.887], [-1.132]]], dtype=musa.float16)
    out = a0[0:2:2**62]

check(call_0)
