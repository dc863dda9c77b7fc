"""musa.testing: PyTorch's torch.testing.assert_close and make_tensor.

assert_close compares tensors, numbers, and sequences and mappings of them
with PyTorch's rules: per-dtype default tolerances (|actual - expected| <=
atol + rtol |expected|, or equality where both are 0: integers and bool),
shape, dtype and (optionally) stride checks, infinities equal only to
themselves, NaN equal to NaN only with equal_nan, and PyTorch's messages
(mismatched elements, the greatest absolute and relative differences and
their indices, the item of a nested input that failed).
"""
import math
import numbers

from .. import _C

__all__ = ["assert_close", "make_tensor"]

Tensor = _C.Tensor

# (rtol, atol) by dtype name, PyTorch's defaults; 0, 0 for the rest
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


def _tolerances(dtypes, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"[assert_close] both 'rtol' and 'atol' must be either given or "
                         f"omitted, but got no {'rtol' if rtol is None else 'atol'}")
    if rtol is not None:
        return rtol, atol
    pairs = [_TOLERANCES.get(str(d).split(".")[-1], (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _is_array(x):
    return type(x).__module__ == "numpy" and hasattr(x, "__array__")


def _where(path):
    return f"\n\nThe failure occurred for item {''.join(path)}" if path else ""


def _fail(msg, path, user_msg, exc=AssertionError):
    """Raise exc with the generated message (named, with the failing item's
    path), or the caller's msg: a string as it is, a callable of ours."""
    msg = "[assert_close] " + msg + _where(path)
    if callable(user_msg):
        msg = user_msg(msg)
    elif user_msg is not None:
        msg = user_msg
    raise exc(msg)


def _diff_msg(kind, diff, idx, tol, equality):
    msg = (f"{kind.title()} difference: {diff}" if idx is None
           else f"Greatest {kind} difference: {diff} at index {idx}")
    return msg + ("" if equality else f" (up to {tol} allowed)") + "\n"


def _mismatch_msg(identifier, extra, abs_diff, abs_idx, rel_diff, rel_idx, rtol, atol):
    equality = rtol == 0 and atol == 0
    msg = f"{identifier} are not {'equal' if equality else 'close'}!\n\n{extra}\n"
    msg += _diff_msg("absolute", abs_diff, abs_idx, atol, equality)
    msg += _diff_msg("relative", rel_diff, rel_idx, rtol, equality)
    return msg.strip()


def _unravel(flat, shape):
    idx = []
    for n in reversed(shape):
        idx.append(flat % n)
        flat //= n
    return tuple(reversed(idx))


def _close_numbers(a, e, rtol, atol, equal_nan):
    if a == e:
        return True
    if isinstance(a, float) or isinstance(e, float):
        if math.isnan(a) and math.isnan(e):
            return equal_nan
        return math.isfinite(a) and math.isfinite(e) and abs(a - e) <= atol + rtol * abs(e)
    return False


def _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype, path, msg):
    if check_dtype and type(actual) is not type(expected):
        _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.", path, msg)
    kinds = [("float64" if isinstance(x, float) else "int64") for x in (actual, expected)]
    rtol, atol = _tolerances(kinds, rtol, atol)
    if _close_numbers(actual, expected, rtol, atol, equal_nan):
        return
    d = abs(actual - expected)
    r = d / abs(expected) if expected != 0 else (math.nan if d == 0 else math.inf)
    _fail(_mismatch_msg("Scalars", f"Expected {expected} but got {actual}.", d, None, r, None,
                        rtol, atol), path, msg)


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_dtype, check_stride,
                     path, msg):
    if tuple(actual.shape) != tuple(expected.shape):
        _fail(f"The values for attribute 'shape' do not match: {tuple(actual.shape)} != "
              f"{tuple(expected.shape)}.", path, msg)
    if check_dtype and actual.dtype != expected.dtype:
        _fail(f"The values for attribute 'dtype' do not match: {actual.dtype} != "
              f"{expected.dtype}.", path, msg)
    if check_stride and tuple(actual.stride()) != tuple(expected.stride()):
        _fail(f"The values for attribute 'stride()' do not match: {tuple(actual.stride())} != "
              f"{tuple(expected.stride())}.", path, msg)
    rtol, atol = _tolerances((actual.dtype, expected.dtype), rtol, atol)
    a, e = actual.detach(), expected.detach()
    if a.numel() == 0:
        return
    exact = not (a.is_floating_point() or e.is_floating_point())
    if exact:
        matches = a == e
    else:
        a, e = a.double(), e.double()
        # infinities are close only to themselves (== above): the bound
        # atol + rtol |e| is infinite too
        matches = (a == e) | (a.isfinite() & e.isfinite() &
                              ((a - e).abs() <= atol + rtol * e.abs()))
        if equal_nan:
            matches = matches | (a.isnan() & e.isnan())
    if bool(matches.all()):
        return
    mism = (~matches).reshape(-1)
    a_f, e_f = a.reshape(-1).double(), e.reshape(-1).double()
    abs_diff = (a_f - e_f).abs().masked_fill(~mism, 0.0)
    rel_diff = (abs_diff / e_f.abs()).masked_fill(~mism, 0.0)
    n_bad, n = int(mism.sum()), mism.numel()
    if a.dim() == 0:
        _fail(_mismatch_msg("Scalars", f"Expected {e.item()} but got {a.item()}.",
                            abs_diff.item(), None, rel_diff.item(), None, rtol, atol), path, msg)
    extra = f"Mismatched elements: {n_bad} / {n} ({n_bad / n:.1%})"
    ia, ir = int(abs_diff.argmax()), int(rel_diff.argmax())
    if bool(abs_diff.isnan().any()):  # NaN is the greatest difference, as torch.max has it
        ia = int(abs_diff.isnan().nonzero()[0, 0])
    if bool(rel_diff.isnan().any()):
        ir = int(rel_diff.isnan().nonzero()[0, 0])
    shape = tuple(a.shape)
    ad, rd = abs_diff[ia].item(), rel_diff[ir].item()
    if exact and ad == int(ad):
        ad = int(ad)
    _fail(_mismatch_msg("Tensor-likes", extra, ad, _unravel(ia, shape), rd,
                        _unravel(ir, shape), rtol, atol), path, msg)


def _as_tensor(x):
    if isinstance(x, Tensor) or not _is_array(x):
        return x
    from .. import from_numpy
    import numpy as np
    return from_numpy(np.ascontiguousarray(x))


def _compare(actual, expected, path, kw):
    actual, expected = _as_tensor(actual), _as_tensor(expected)
    msg = kw["msg"]
    if isinstance(actual, Tensor) and isinstance(expected, Tensor):
        _compare_tensors(actual, expected, kw["rtol"], kw["atol"], kw["equal_nan"],
                         kw["check_dtype"], kw["check_stride"], path, msg)
        return
    num = (numbers.Number,)
    if isinstance(actual, num) and isinstance(expected, num) and not isinstance(actual, Tensor):
        if isinstance(actual, complex) or isinstance(expected, complex):
            _fail("complex numbers are not supported: musa has no complex dtype", path, msg,
                  TypeError)
        _compare_numbers(actual, expected, kw["rtol"], kw["atol"], kw["equal_nan"],
                         kw["check_dtype"], path, msg)
        return
    seq = (list, tuple)
    if isinstance(actual, seq) and isinstance(expected, seq):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                  path, msg)
        for i, (x, y) in enumerate(zip(actual, expected)):
            _compare(x, y, path + [f"[{i}]"], kw)
        return
    if isinstance(actual, dict) and isinstance(expected, dict):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual "
                  f"mapping: {sorted(missing, key=repr)}\nAdditional keys in the actual "
                  f"mapping: {sorted(extra, key=repr)}", path, msg)
        for k in expected:
            _compare(actual[k], expected[k], path + [f"[{k!r}]"], kw)
        return
    _fail(f"No comparison pair was able to handle inputs of type {type(actual)} and "
          f"{type(expected)}.", path, msg, TypeError)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise AssertionError unless actual and expected are close (the module
    docstring has the rules). msg replaces the message (a string) or maps it
    (a callable)."""
    for name, v in (("rtol", rtol), ("atol", atol)):
        if v is not None and (not isinstance(v, numbers.Real) or v < 0):
            raise ValueError(f"[assert_close] {name} must be a non-negative number, got {v!r}")
    _compare(actual, expected, [], dict(rtol=rtol, atol=atol, equal_nan=equal_nan,
                                        check_dtype=check_dtype, check_stride=check_stride,
                                        msg=msg))


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of the shape and dtype with values drawn uniformly from [low,
    high) (floats: [-9, 9] by default; integers: [-9, 10), unsigned from 0;
    bool: True or False), as torch.testing.make_tensor."""
    from .. import bool as bool_, finfo, full as full_of, rand, randint, uint8
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if device not in (None, "cpu"):
        raise ValueError(f"[make_tensor] device {device!r}: musa tensors live on the cpu")
    if low is not None and high is not None and low > high:
        raise ValueError(f"[make_tensor] low {low} is greater than high {high}")
    full = list(shape)
    if noncontiguous and full:
        full[-1] *= 2
    if dtype is bool_:
        t = randint(0, 2, full).to(bool_)
    elif dtype.is_floating_point:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        t = (rand(full, dtype=_C.float64) * (hi - lo) + lo).to(dtype)
        if exclude_zero:
            t = t.masked_fill(t == 0, finfo(dtype).tiny)
    else:
        lo = (0 if dtype is uint8 else -9) if low is None else math.ceil(low)
        hi = 10 if high is None else math.ceil(high)
        if hi <= lo:  # low == high: that value everywhere
            t = full_of(full, lo, dtype=dtype)
        else:
            t = randint(lo, hi, full, dtype=_C.int64).to(dtype)
        if exclude_zero:
            t = t.masked_fill(t == 0, 1)
    if noncontiguous and full:
        t = t[..., ::2]
    elif not full:
        t = t.reshape(())
    if memory_format is not None:
        t = t.contiguous(memory_format=memory_format)
    if requires_grad:
        if not dtype.is_floating_point:
            raise ValueError(f"[make_tensor] requires_grad=True needs a floating dtype, got "
                             f"{dtype}")
        t.requires_grad_(True)
    return t
