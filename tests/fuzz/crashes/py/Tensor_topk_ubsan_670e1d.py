"""Tensor.topk: ubsan

runtime error: store to null pointer of type 'int64_t'
/work/main/src/backend/cpu/sort.c:83:38: runtime error: store to null pointer of type 'int64_t'
    #0 0x7f4545546bcf in sort_lines /work/main/src/backend/cpu/sort.c:83
    #1 0x7f454554765c in cpu_topk /work/main/src/backend/cpu/sort.c:107
    #2 0x7f454517a139 in run_kernel /work/main/src/ops/dispatch.c:171
    #3 0x7f454517b7c1 in run_now /work/main/src/ops/dispatch.c:229

Found by tests/fuzz/fuzz_py.py (batch seed 5049, call 24); replayed by
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
PYTHON_OWN = re.compile("(takes|expected) .*(positional )?arguments?|got an unexpected keyword argument|missing \\d+ required|got multiple values for|takes no (keyword )?arguments|takes exactly one argument|argument after \\* must be|must be a mapping|unsupported operand type|not supported between instances of|bad operand type for|unsupported format string passed to|Unknown format code|can only concatenate (tuple|list)|can't multiply sequence by non-int")  # Python's own argument and operator errors


def check(call):
    try:
        call()
    except STANDARD as e:
        print(f"{type(e).__name__}: {e}")
        if not str(e).startswith("[") and not PYTHON_OWN.search(str(e)):
            raise


def call_0():
    a0 = musa.full((1,), 1, dtype=musa.uint8).expand(4611686018427387904,)
    a1 = 5
    out = a0.topk(a1)

check(call_0)
