"""F.upsample_nearest: error

message does not start with [name]: OverflowError: cannot convert float infinity to integer

Found by tests/fuzz/fuzz_py.py (batch seed 2123, call 157); replayed by
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
    a0 = musa.tensor([[[-2.19, -1.442, -0.968], [1.564, 1.703, -3.011], [-0.622, 0.955, -2.693]], [[-3.986, 3.267, -3.597], [2.205, -1.659, -0.447], [3.359, 1.903, 0.057]]], dtype=musa.float64)
    a1 = inf
    out = F.upsample_nearest(a0, scale_factor=a1)

check(call_0)
