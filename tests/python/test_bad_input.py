"""No input, however wrong, crashes the interpreter: every function of the
musa namespace, musa.nn.functional and every Tensor method is called with
argument lists of wrong types, huge and negative sizes, empty and 0-d
tensors. Each call may succeed or raise an ordinary Python exception; the
process must survive (a crash fails the whole run)."""
import itertools

import pytest

import musa
import musa.nn.functional as F

SKIP = {"manual_seed", "set_num_threads", "set_default_dtype", "set_rng_state", "empty_cache",
        "reset_peak_memory_stats", "uniform_", "normal_", "bernoulli_", "exponential_",
        "set_anomaly_enabled", "set_warn_always", "set_default_tensor_type",  # (process-wide switches)
        "imag"}  # (a property that raises on real tensors, as torch's)
HUGE = 1 << 62
pytestmark = pytest.mark.filterwarnings("ignore")


def bad_values():
    t = musa.randn(2, 3)
    return [None, "x", 1.5, -1, HUGE, -HUGE, (), (HUGE, HUGE), [None], object(), musa.zeros(0),
            musa.tensor(1.0), t, t.T, musa.ones(2, dtype=musa.int64), musa.ones(2, dtype=musa.bool),
            musa.ones(3, dtype=musa.bfloat16), musa.float16, musa.device("cpu")]


def callables():
    seen = set()
    for mod in (musa, F):
        for name in dir(mod):
            if name.startswith("_") or name in SKIP:
                continue
            fn = getattr(mod, name)
            if callable(fn) and not isinstance(fn, type) and id(fn) not in seen:
                seen.add(id(fn))
                yield f"{mod.__name__}.{name}", fn
    t = musa.randn(2, 3)
    for name in dir(musa.Tensor):
        if name.startswith("_") or name in SKIP:
            continue
        m = getattr(t, name, None)
        if callable(m):
            yield f"Tensor.{name}", m


CALLS = list(callables())


@pytest.mark.parametrize("name,fn", CALLS, ids=[c[0] for c in CALLS])
def test_wrong_arguments_raise_or_work(name, fn):
    vals = bad_values()
    arglists = [()] + [(v,) for v in vals] + list(itertools.product(vals[:12], vals[10:14]))
    for args in arglists:
        try:
            fn(*args)
        except (TypeError, ValueError, IndexError, RuntimeError, OverflowError, MemoryError,
                NotImplementedError, AttributeError, KeyError, ZeroDivisionError, StopIteration):
            pass
