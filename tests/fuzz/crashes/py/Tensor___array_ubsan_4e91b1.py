"""Tensor.__array__: ubsan

runtime error: signed integer overflow: 4611686018427387904 * 4 cannot be represented in type 'long 
==26013==WARNING: AddressSanitizer failed to allocate 0x200000000000 bytes
==26013==WARNING: AddressSanitizer failed to allocate 0x200000000000 bytes
==26013==WARNING: AddressSanitizer failed to allocate 0x80000000000 bytes
==26013==WARNING: AddressSanitizer failed to allocate 0x80000000000 bytes
/work/wt-pyfuzz/python/musa/_C/interop.c:79:17: runtime error: signed integer overflow: 461168601842

Found by tests/fuzz/fuzz_py.py (batch seed 2027, call 193); replayed by
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
    a0 = musa.full((1,), 2, dtype=musa.float32).expand(4611686018427387904,)
    out = np.asarray(a0)

check(call_0)
