"""musa.autograd.functional: derivatives of a whole function, as PyTorch's
torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp and hvp.

All of them run on the reverse-mode engine (musa.autograd.grad). Forward
products (jvp, hvp, a forward-mode Jacobian) use the double-backward
trick: the vector-Jacobian product u -> u^T J is linear in u, so
differentiating it with respect to u, against v, gives J v. Each function
differentiates func at fresh copies of the inputs; with create_graph=True
the results keep their history (and the copies their inputs'), so they
can be differentiated again. See docs/autograd.md.
"""
from .. import _C
from . import enable_grad as _enable_grad, grad as _grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

Tensor = _C.Tensor


def _as_tuple(x, what, who):
    """(x as a tuple of tensors, whether x was a tuple or list)."""
    if isinstance(x, Tensor):
        return (x,), False
    if isinstance(x, (tuple, list)):
        for i, t in enumerate(x):
            if not isinstance(t, Tensor):
                raise TypeError(f"[{who}] {what} must be a Tensor or a tuple of Tensors, but "
                                f"element {i} is a {type(t).__name__}")
        return tuple(x), True
    raise TypeError(f"[{who}] {what} must be a Tensor or a tuple of Tensors, not "
                    f"{type(x).__name__}")


def _untuple(res, was_tuple):
    """res (a tuple) as the caller gave its counterpart: the tuple, or its
    one element. was_tuple may be a pair (outer, inner) for nested results."""
    if isinstance(was_tuple, tuple):
        outer, inner = was_tuple
        if not inner:
            res = tuple(r[0] for r in res)
        return res if outer else res[0]
    return res if was_tuple else res[0]


def _prepare(inputs, create_graph, who):
    """Leaves to differentiate at: the inputs detached (or, with create_graph,
    views that keep an input's history)."""
    out = []
    for i, x in enumerate(inputs):
        if not (x.is_floating_point() or x.is_complex()):
            raise TypeError(f"[{who}] input {i} has dtype {x.dtype}: only floating point "
                            f"inputs have derivatives")
        out.append(x.view_as(x) if create_graph and x.requires_grad
                   else x.detach().requires_grad_(True))
    return tuple(out)


def _check_v(v, refs, what, who):
    """v (a tuple) against the tensors it multiplies (each an `what`): same
    count and shapes."""
    if len(v) != len(refs):
        raise ValueError(f"[{who}] v has {len(v)} tensor(s) for {len(refs)} {what}(s)")
    for i, (a, b) in enumerate(zip(v, refs)):
        if tuple(a.shape) != tuple(b.shape):
            raise ValueError(f"[{who}] v[{i}] has shape {tuple(a.shape)} but {what} {i} has "
                             f"shape {tuple(b.shape)}")


def _default_v(v, refs, what, who):
    """v as a tuple; None stands for 1 when refs is one tensor of one element."""
    if v is not None:
        v, _ = _as_tuple(v, "v", who)
        _check_v(v, refs, what, who)
        return v
    if len(refs) != 1 or refs[0].numel() != 1:
        raise ValueError(f"[{who}] v can be None only when there is one {what} with one "
                         f"element; there are {len(refs)}, the first of shape "
                         f"{tuple(refs[0].shape) if refs else ()}")
    return None


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """grad of the outputs that require grad (None for every input when none
    does), unused inputs None."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                 retain_graph=retain_graph, create_graph=create_graph, allow_unused=True)


def _zeros_for(grads, refs, strict, what, who):
    """None gradients as zeros like their reference (strict: an error: the
    result does not depend on that input)."""
    out = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"[{who}] the {what} does not depend on input {i} "
                                   f"(strict=True)")
            g = _C.zeros_like(r)
        out.append(g)
    return tuple(out)


def _check_outputs(outputs, strict, who):
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"[{who}] output {i} of the function does not depend on "
                                   f"the inputs (strict=True)")


def _finish(ts, create_graph):
    return ts if create_graph else tuple(t.detach() for t in ts)


def _call(func, inputs, who):
    return _as_tuple(func(*inputs), "the function's output", who)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product at inputs."""
    with _enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, "vjp")
        outputs, out_tuple = _call(func, inputs, "vjp")
        _check_outputs(outputs, strict, "vjp")
        v = _default_v(v, outputs, "output", "vjp")
        grads = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _zeros_for(grads, inputs, strict, "output", "vjp")
    return (_untuple(_finish(outputs, create_graph), out_tuple),
            _untuple(_finish(res, create_graph), in_tuple))


def _jvp_parts(func, inputs, create_graph, strict, who):
    """(outputs, u, J^T u) with u zeros that require grad: J^T u is linear in
    u, and its gradient with respect to u against v is J v."""
    outputs, out_tuple = _call(func, inputs, who)
    _check_outputs(outputs, strict, who)
    u = tuple(_C.zeros_like(o).requires_grad_(True) for o in outputs)
    back = _autograd_grad(outputs, inputs, u, create_graph=True)
    if strict and any(b is None for b in back):
        raise RuntimeError(f"[{who}] the output does not depend on input "
                           f"{[b is None for b in back].index(True)} (strict=True)")
    return outputs, out_tuple, u, back


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product at inputs."""
    with _enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, "jvp")
        v = _default_v(v, inputs, "input", "jvp")
        outputs, out_tuple, u, back = _jvp_parts(func, inputs, create_graph, strict, "jvp")
        grads = _autograd_grad(back, u, v, create_graph=create_graph)
        res = _zeros_for(grads, outputs, strict, "output", "jvp")
    return (_untuple(_finish(outputs, create_graph), out_tuple),
            _untuple(_finish(res, create_graph), out_tuple))


def _stack_rows(rows, shape, ref):
    """The rows (each ref's shape) stacked as shape + ref's shape."""
    full = tuple(shape) + tuple(ref.shape)
    if not rows:
        return _C.zeros(full, dtype=ref.dtype)
    return _C.stack(rows, 0).reshape(full)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of func at inputs: for output i and input j a tensor of
    shape output_i.shape + input_j.shape (nested tuples as func's outputs
    and the inputs are tuples). reverse-mode takes one backward pass per
    output element, forward-mode one per input element (both on the
    reverse engine; vectorize is accepted and changes nothing)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(f"[jacobian] strategy must be 'reverse-mode' or 'forward-mode', got "
                         f"{strategy!r}")
    with _enable_grad():
        inputs, in_tuple = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, "jacobian")
        if strategy == "forward-mode":
            outputs, out_tuple, u, back = _jvp_parts(func, inputs, create_graph, strict,
                                                     "jacobian")
            cols = [[[] for _ in inputs] for _ in outputs]  # [output][input] -> columns
            for j, x in enumerate(inputs):
                for e in range(x.numel()):  # d(back_j . onehot_e)/du_i: column e of J_ij
                    onehot = _C.zeros(x.numel(), dtype=x.dtype)
                    onehot[e] = 1
                    g = _autograd_grad((back[j],), u, (onehot.reshape(x.shape),),
                                       create_graph=create_graph, retain_graph=True)
                    g = _zeros_for(g, outputs, strict, "output", "jacobian")
                    for i in range(len(outputs)):
                        cols[i][j].append(g[i])
            res = []
            for i, o in enumerate(outputs):
                row = []
                for j, x in enumerate(inputs):  # columns over x's elements -> o.shape + x.shape
                    c = cols[i][j]
                    if not c or o.numel() == 0:
                        row.append(_C.zeros(tuple(o.shape) + tuple(x.shape), dtype=o.dtype))
                    else:
                        m = _C.stack([t.reshape(-1) for t in c], 1)  # (o.numel(), x.numel())
                        row.append(m.reshape(tuple(o.shape) + tuple(x.shape)))
                res.append(tuple(row))
        else:
            outputs, out_tuple = _call(func, inputs, "jacobian")
            _check_outputs(outputs, strict, "jacobian")
            res = []
            for i, o in enumerate(outputs):
                flat = o.reshape(-1)
                rows = [[] for _ in inputs]
                for e in range(o.numel()):
                    g = _autograd_grad((flat[e],), inputs, retain_graph=True,
                                       create_graph=create_graph)
                    g = _zeros_for(g, inputs, strict, f"output {i}", "jacobian")
                    for j in range(len(inputs)):
                        rows[j].append(g[j])
                res.append(tuple(_stack_rows(rows[j], o.shape, x) for j, x in enumerate(inputs)))
        res = tuple(_finish(r, create_graph) for r in res)
    return _untuple(res, (out_tuple, in_tuple))


def _scalar_output(func, who):
    def f(*inputs):
        out, is_tuple = _as_tuple(func(*inputs), "the function's output", who)
        if is_tuple or out[0].numel() != 1:
            raise RuntimeError(f"[{who}] the function must return a single Tensor with one "
                               f"element, got " + (f"a tuple of {len(out)}" if is_tuple else
                                                   f"shape {tuple(out[0].shape)}"))
        return out[0].reshape(())
    return f


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function at inputs: for inputs i and j a
    tensor of shape input_i.shape + input_j.shape (a tuple of tuples when
    inputs is a tuple): the Jacobian of its gradient."""
    inputs_t, in_tuple = _as_tuple(inputs, "inputs", "hessian")
    scalar = _scalar_output(func, "hessian")

    def gradient(*xs):
        return jacobian(scalar, xs, create_graph=True, strict=strict)

    res = jacobian(gradient, inputs_t, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _untuple(res, (in_tuple, in_tuple))


def _hessian_parts(func, inputs, create_graph, strict, who):
    inputs, in_tuple = _as_tuple(inputs, "inputs", who)
    inputs = _prepare(inputs, create_graph, who)
    out = _scalar_output(func, who)(*inputs)
    _check_outputs((out,), strict, who)
    g = _autograd_grad((out,), inputs, create_graph=True)
    g = _zeros_for(g, inputs, strict, "output", who)
    return inputs, in_tuple, out, g


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of a scalar function."""
    with _enable_grad():
        inputs, in_tuple, out, g = _hessian_parts(func, inputs, create_graph, strict, "vhp")
        v = _default_v(v, inputs, "input", "vhp")
        res = _autograd_grad(g, inputs, v, create_graph=create_graph)
        res = _zeros_for(res, inputs, strict, "gradient", "vhp")
    return _finish((out,), create_graph)[0], _untuple(_finish(res, create_graph), in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of a scalar function
    (by the double-backward trick on the gradient)."""
    with _enable_grad():
        inputs, in_tuple, out, g = _hessian_parts(func, inputs, create_graph, strict, "hvp")
        v = _default_v(v, inputs, "input", "hvp")
        u = tuple(_C.zeros_like(x).requires_grad_(True) for x in inputs)
        back = _autograd_grad(g, inputs, u, create_graph=True)
        res = _autograd_grad(back, u, v, create_graph=create_graph)
        res = _zeros_for(res, inputs, strict, "gradient", "hvp")
    return _finish((out,), create_graph)[0], _untuple(_finish(res, create_graph), in_tuple)
