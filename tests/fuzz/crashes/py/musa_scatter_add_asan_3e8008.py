"""musa.scatter_add: asan

ERROR: AddressSanitizer: SEGV on unknown address (pc 0x7efc116cc688 bp 0x7ffe814f2d80 sp 0x7ffe814f2
AddressSanitizer:DEADLYSIGNAL
=================================================================
==941==ERROR: AddressSanitizer: SEGV on unknown address (pc 0x7efc116cc688 bp 0x7ffe814f2d80 sp 0x7f
==941==The signal is caused by a READ memory access.
==941==Hint: this fault was caused by a dereference of a high value address (see register values bel

Found by tests/fuzz/fuzz_py.py (batch seed 509, call 162); replayed by
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
    a0 = musa.tensor([[0.552, 1.824, 1.508], [-1.916, 2.636, -3.227], [2.455, 1.859, -3.712], [-1.13, -3.607, -2.942]], dtype=musa.bfloat16)[1:].requires_grad_()
    a1 = True
    out = a0.sort(descending=a1)

def call_1():
    a0 = musa.tensor(2, dtype=musa.int64)
    a1 = -1
    a2 = musa.tensor([-1, 0, 0, -1], dtype=musa.int64)
    a3 = musa.tensor(-0.038, dtype=musa.float32)
    out = musa.scatter_add(a0, a1, a2, a3)

check(call_0)
check(call_1)
