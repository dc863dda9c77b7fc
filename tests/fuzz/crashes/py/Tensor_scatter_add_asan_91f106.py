"""Tensor.scatter_add: asan

ERROR: AddressSanitizer: SEGV on unknown address 0x2478800427b8 (pc 0x7f4a1f2cbeec bp 0x7ffef73283c0
==1003==WARNING: AddressSanitizer failed to allocate 0x40000000000 bytes
==1003==WARNING: AddressSanitizer failed to allocate 0x40000000000 bytes
==1003==WARNING: AddressSanitizer failed to allocate 0x100000000000 bytes
==1003==WARNING: AddressSanitizer failed to allocate 0x100000000000 bytes
AddressSanitizer:DEADLYSIGNAL

Found by tests/fuzz/fuzz_py.py (batch seed 513, call 174); replayed by
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
    a0 = musa.tensor(1.687, dtype=musa.bfloat16)
    a1 = 0
    a2 = musa.tensor([0, 0], dtype=musa.int64)
    a3 = musa.tensor(-2.856, dtype=musa.bfloat16)
    out = a0.scatter_add(a1, a2, a3)

check(call_0)
