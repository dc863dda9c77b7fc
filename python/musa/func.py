"""musa.func: PyTorch's torch.func transforms: grad, grad_and_value, vjp,
jvp, jacrev, jacfwd, hessian, vmap, functional_call and
stack_module_state.

How they are built (docs/autograd.md, "musa.func"):

* The derivatives run on the tape (musa.autograd.grad). Each transform
  differentiates at fresh leaves; where an input already requires grad (an
  outer transform, or the caller's own autograd), the leaf is a view of it
  and the derivative keeps its history (create_graph), so transforms
  compose (hessian is jacfwd of jacrev) and their results differentiate
  with ordinary autograd, as in PyTorch. There is no level tracking: a
  closure that differentiates one transform's variable inside another's
  sees their derivatives mixed (functorch's "perturbation confusion").
* Forward products (jvp, jacfwd) use the double-backward trick: u -> J^T u
  is linear in u, so its gradient with respect to u against v is J v.
* jacrev takes one backward pass per output element, jacfwd one forward
  product per input element.
* vmap calls the function once per batch element (the mapped arguments
  sliced with select) and stacks the results along out_dims: PyTorch's
  semantics (in_dims and out_dims trees, None for unmapped, randomness
  "error", "different" or "same" on the default generator), one call per
  element rather than batched kernels. Inside musa.jit the loop is
  captured unrolled.

Arguments and results may be trees of tuples, lists and dicts of tensors.
"""
from . import _C
from .autograd import enable_grad as _enable_grad, grad as _grad
from .autograd.functional import _autograd_grad, _zeros_for

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call", "stack_module_state"]

Tensor = _C.Tensor


# ---- trees ----

def _flatten(tree, leaves):
    """Append tree's leaves (tensors and other values) to leaves; its spec."""
    if isinstance(tree, (tuple, list)) and not hasattr(tree, "_fields"):
        return (type(tree), [_flatten(x, leaves) for x in tree])
    if isinstance(tree, dict):
        return (dict, list(tree), [_flatten(v, leaves) for v in tree.values()])
    leaves.append(tree)
    return None


def _unflatten(spec, it):
    """The tree of spec with leaves taken from the iterator it."""
    if spec is None:
        return next(it)
    if spec[0] is dict:
        return {k: _unflatten(s, it) for k, s in zip(spec[1], spec[2])}
    return spec[0](_unflatten(s, it) for s in spec[1])


def _tree(tree):
    leaves = []
    return leaves, _flatten(tree, leaves)


def _rebuild(spec, leaves):
    return _unflatten(spec, iter(leaves))


def _argnums(argnums, n, who):
    """argnums as a tuple of positions in [0, n), and whether it was an int."""
    one = isinstance(argnums, int)
    nums = (argnums,) if one else argnums
    if not isinstance(nums, tuple) or not nums or not all(isinstance(a, int) for a in nums):
        raise TypeError(f"[{who}] argnums must be an int or a non-empty tuple of ints, got "
                        f"{argnums!r}")
    out = []
    for a in nums:
        if not -n <= a < n:
            raise ValueError(f"[{who}] argnums {a} is out of range for a function called with "
                             f"{n} positional argument(s)")
        out.append(a % n)
    if len(set(out)) != len(out):
        raise ValueError(f"[{who}] argnums {argnums!r} repeats an argument")
    return tuple(out), one


def _leaf(x, who, what):
    """A leaf to differentiate at: a view of x where x has history (so the
    derivative keeps it), else x detached."""
    if not isinstance(x, Tensor):
        raise TypeError(f"[{who}] {what} must be a tensor (or a tree of them), got "
                        f"{type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"[{who}] {what} has dtype {x.dtype}: only floating point tensors "
                        f"have derivatives")
    return x.view_as(x) if x.requires_grad else x.detach().requires_grad_(True)


def _prepare(args, nums, who):
    """args with the trees at positions nums replaced by fresh leaves:
    (args, [(leaves, spec) per position], whether any input had history)."""
    args = list(args)
    parts, nested = [], False
    for n in nums:
        leaves, spec = _tree(args[n])
        nested |= any(isinstance(t, Tensor) and t.requires_grad for t in leaves)
        fresh = [_leaf(t, who, f"argument {n}") for t in leaves]
        args[n] = _rebuild(spec, fresh)
        parts.append((fresh, spec))
    return args, parts, nested and _C.is_grad_enabled()


def _split_aux(out, has_aux, who):
    if not has_aux:
        return out, None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise RuntimeError(f"[{who}] has_aux=True: the function must return a pair "
                           f"(output, aux), got {type(out).__name__}")
    return out[0], out[1]


def _grads(outputs, inputs, grad_outputs, create_graph):
    """d outputs / d inputs against grad_outputs; zeros where an input is
    unused or no output has history (autograd.functional's helpers)."""
    if not inputs:
        return []
    got = _autograd_grad(outputs, list(inputs), grad_outputs, create_graph, retain_graph=True)
    return list(_zeros_for(got, inputs, False, "output", "func"))


def _keep(t, nested):
    return t if nested or not isinstance(t, Tensor) else t.detach()


# ---- grad, grad_and_value, vjp, jvp ----

def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (gradient, value) of func, whose output must be
    a 0-dim tensor, with respect to the arguments at argnums; with has_aux,
    func returns (output, aux) and the result is ((gradient, (value, aux)))."""
    def wrapper(*args, **kwargs):
        nums, one = _argnums(argnums, len(args), "grad_and_value")
        with _enable_grad():
            args, parts, nested = _prepare(args, nums, "grad_and_value")
            out, aux = _split_aux(func(*args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(out, Tensor) or out.dim() != 0:
                got = (f"a tensor of shape {tuple(out.shape)}" if isinstance(out, Tensor)
                       else type(out).__name__)
                raise RuntimeError(f"[grad_and_value] the function must return a 0-dim "
                                   f"tensor, got {got}; vjp or jacrev take other outputs")
            if not out.is_floating_point():
                raise RuntimeError(f"[grad_and_value] the function's output has dtype "
                                   f"{out.dtype}: only floating point outputs have gradients")
            flat = [t for leaves, _ in parts for t in leaves]
            gs = _grads([out], flat, [None], nested)
        it = iter([_keep(g, nested) for g in gs])
        res = tuple(_unflatten(spec, it) for _, spec in parts)
        res = res[0] if one else res
        value = _keep(out, nested)
        return (res, (value, aux)) if has_aux else (res, value)

    wrapper.__name__ = f"grad_and_value({getattr(func, '__name__', 'func')})"
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of func (a 0-dim output) with
    respect to the arguments at argnums ((gradient, aux) with has_aux)."""
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    wrapper.__name__ = f"grad({getattr(func, '__name__', 'func')})"
    return wrapper


def _outputs(out, who):
    leaves, spec = _tree(out)
    for i, t in enumerate(leaves):
        if not isinstance(t, Tensor):
            raise RuntimeError(f"[{who}] the function must return tensors (or trees of them); "
                               f"output leaf {i} is a {type(t).__name__}")
    return leaves, spec


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn[, aux]): vjp_fn(cotangents), cotangents shaped
    as the output, returns the vector-Jacobian products, one per primal."""
    nums = tuple(range(len(primals)))
    with _enable_grad():
        args, parts, nested = _prepare(primals, nums, "vjp")
        out, aux = _split_aux(func(*args), has_aux, "vjp")
        outs, out_spec = _outputs(out, "vjp")
    flat = [t for leaves, _ in parts for t in leaves]

    def vjp_fn(cotangents):
        cts, spec = _tree(cotangents)
        if spec != out_spec or len(cts) != len(outs):
            raise RuntimeError("[vjp] the cotangents must have the structure of the function's "
                               "output")
        for i, (c, o) in enumerate(zip(cts, outs)):
            if not isinstance(c, Tensor) or tuple(c.shape) != tuple(o.shape):
                got = tuple(c.shape) if isinstance(c, Tensor) else type(c).__name__
                raise RuntimeError(f"[vjp] cotangent {i} must be a tensor of shape "
                                   f"{tuple(o.shape)}, got {got}")
        deep = nested or any(c.requires_grad for c in cts)
        with _enable_grad():
            gs = _grads(outs, flat, cts, deep)
        it = iter([_keep(g, deep) for g in gs])
        return tuple(_unflatten(spec, it) for _, spec in parts)

    result = _rebuild(out_spec, [_keep(o, nested) for o in outs])
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def _jv(outs, flat, tangents, nested):
    """J v for outputs outs of inputs flat (the double-backward trick)."""
    live = [o for o in outs if o.requires_grad]
    us = [_C.zeros_like(o).requires_grad_(True) for o in live]
    jt = (None,) * len(flat)
    if live and flat:
        jt = _grad(live, flat, us, retain_graph=True, create_graph=True, allow_unused=True)
    pairs = [(g, v) for g, v in zip(jt, tangents) if g is not None and g.requires_grad]
    jv = (None,) * len(us)
    if pairs and us:
        jv = _grad([g for g, _ in pairs], us, [v for _, v in pairs], retain_graph=True,
                   create_graph=nested, allow_unused=True)
    it = iter(jv)
    return [(next(it) if o.requires_grad else None) for o in outs]


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), J tangents[, aux]): the Jacobian-vector product."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError(f"[jvp] primals and tangents must be tuples, got "
                           f"{type(primals).__name__} and {type(tangents).__name__}")
    if strict:
        raise RuntimeError("[jvp] strict=True is not implemented (as in PyTorch)")
    p_leaves, p_spec = _tree(primals)
    t_leaves, t_spec = _tree(tangents)
    if p_spec != t_spec:
        raise RuntimeError("[jvp] primals and tangents must have the same structure")
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if not (isinstance(t, Tensor) and isinstance(p, Tensor)) or t.shape != p.shape:
            raise RuntimeError(f"[jvp] tangent {i} must be a tensor of primal {i}'s shape "
                               f"{tuple(p.shape) if isinstance(p, Tensor) else '?'}")
    nums = tuple(range(len(primals)))
    with _enable_grad():
        args, parts, nested = _prepare(primals, nums, "jvp")
        nested |= any(t.requires_grad for t in t_leaves) and _C.is_grad_enabled()
        out, aux = _split_aux(func(*args), has_aux, "jvp")
        outs, out_spec = _outputs(out, "jvp")
        flat = [t for leaves, _ in parts for t in leaves]
        jv = _jv(outs, flat, t_leaves, nested)
    jv = [_keep(j, nested) if j is not None else _C.zeros_like(o) for j, o in zip(jv, outs)]
    res = (_rebuild(out_spec, [_keep(o, nested) for o in outs]), _rebuild(out_spec, jv))
    return res + (aux,) if has_aux else res


# ---- Jacobians ----

def _jacobian(func, argnums, has_aux, forward, who):
    def wrapper(*args, **kwargs):
        nums, one = _argnums(argnums, len(args), who)
        with _enable_grad():
            args, parts, nested = _prepare(args, nums, who)
            out, aux = _split_aux(func(*args, **kwargs), has_aux, who)
            outs, out_spec = _outputs(out, who)
            flat = [t for leaves, _ in parts for t in leaves]
            # blocks[i][j]: d outs[i] / d flat[j], of shape outs[i] + flat[j]
            blocks = [[None] * len(flat) for _ in outs]
            if forward:
                for j, x in enumerate(flat):
                    cols = []
                    for k in range(x.numel()):
                        e = _C.zeros(x.numel(), dtype=x.dtype).index_fill(0, _C.tensor([k]), 1.0)
                        tangents = [e.reshape(x.shape) if q == j else _C.zeros_like(y)
                                    for q, y in enumerate(flat)]
                        cols.append(_jv(outs, flat, tangents, nested))
                    for i, o in enumerate(outs):
                        col = [c[i] if c[i] is not None else _C.zeros_like(o) for c in cols]
                        m = (_C.stack(col, -1) if col else _C.zeros(tuple(o.shape) + (0,),
                                                                   dtype=o.dtype))
                        blocks[i][j] = m.reshape(tuple(o.shape) + tuple(x.shape))
            else:
                for i, o in enumerate(outs):
                    rows = [[] for _ in flat]
                    flat_o = o.reshape(-1)
                    for k in range(o.numel()):
                        if o.requires_grad:
                            gs = _grads([flat_o[k]], flat, [None], nested)
                        else:
                            gs = [_C.zeros_like(x) for x in flat]
                        for j, g in enumerate(gs):
                            rows[j].append(g)
                    for j, x in enumerate(flat):
                        m = (_C.stack(rows[j], 0) if rows[j] else
                             _C.zeros((0,) + tuple(x.shape), dtype=x.dtype))
                        blocks[i][j] = m.reshape(tuple(o.shape) + tuple(x.shape))
        per_out = []
        for i in range(len(outs)):
            it = iter([_keep(b, nested) for b in blocks[i]])
            per_in = tuple(_unflatten(spec, it) for _, spec in parts)
            per_out.append(per_in[0] if one else per_in)
        jac = _rebuild(out_spec, per_out)
        return (jac, aux) if has_aux else jac

    wrapper.__name__ = f"{who}({getattr(func, '__name__', 'func')})"
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of func with respect to the arguments at argnums, by
    reverse mode (one backward pass per output element): for each output
    leaf, a tensor of shape output.shape + input.shape per input."""
    _chunk(chunk_size, "jacrev")
    return _jacobian(func, argnums, has_aux, False, "jacrev")


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of func with respect to the arguments at argnums, by
    forward products (one per input element), laid out as jacrev's."""
    _randomness(randomness, "jacfwd")
    return _jacobian(func, argnums, has_aux, True, "jacfwd")


def hessian(func, argnums=0):
    """The Hessian of func: jacfwd of jacrev."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---- vmap ----

def _chunk(chunk_size, who):
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"[{who}] chunk_size must be None or a positive int, got "
                         f"{chunk_size!r}")


def _randomness(randomness, who):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"[{who}] randomness must be 'error', 'different' or 'same', got "
                           f"{randomness!r}")


def _dims_for(dims, tree, who, what):
    """dims (an int, None, or a tree over tree's structure) as one entry per
    leaf of tree."""
    leaves, spec = _tree(tree)
    if dims is None or isinstance(dims, int):
        return [dims] * len(leaves)
    d_leaves, d_spec = _tree(dims)
    if d_spec != spec:
        raise ValueError(f"[{who}] {what} {dims!r} does not match the structure of "
                         f"the value it maps")
    for d in d_leaves:
        if d is not None and not isinstance(d, int):
            raise ValueError(f"[{who}] {what} entries must be ints or None, got {d!r}")
    return d_leaves


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over a batch dim of its arguments (in_dims: an int or None
    for all positional arguments, or a tuple with one entry per argument,
    itself an int, None or a tree matching that argument), its results
    stacked along out_dims. One call of func per batch element."""
    _randomness(randomness, "vmap")
    _chunk(chunk_size, "vmap")
    if not (in_dims is None or isinstance(in_dims, (int, tuple))):
        raise ValueError(f"[vmap] in_dims must be an int, None or a tuple, got "
                         f"{type(in_dims).__name__}")

    def wrapper(*args, **kwargs):
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"[vmap] in_dims has {len(in_dims)} entries for {len(args)} "
                             f"positional argument(s)")
        leaves, spec = _tree(args)
        dims = []
        for n, a in enumerate(args):
            d = in_dims[n] if isinstance(in_dims, tuple) else in_dims
            dims += _dims_for(d, a, "vmap", f"in_dims[{n}]" if isinstance(in_dims, tuple)
                              else "in_dims")
        size = None
        for k, (x, d) in enumerate(zip(leaves, dims)):
            if d is None:
                continue
            if not isinstance(x, Tensor):
                raise ValueError(f"[vmap] in_dims maps dim {d} of a {type(x).__name__}; only "
                                 f"tensors are mapped (use None for other arguments)")
            if not -x.dim() <= d < x.dim():
                raise ValueError(f"[vmap] in_dims {d} is out of range for a tensor of "
                                 f"{x.dim()} dims (shape {tuple(x.shape)})")
            dims[k] = d % x.dim()
            if size is None:
                size = x.shape[dims[k]]
            elif x.shape[dims[k]] != size:
                raise ValueError(f"[vmap] mapped dims differ in size: {size} and "
                                 f"{x.shape[dims[k]]} (shape {tuple(x.shape)}, dim {d})")
        if size is None:
            raise ValueError("[vmap] no argument is mapped: at least one tensor argument needs "
                             "an int in in_dims")
        if size == 0:
            raise ValueError("[vmap] the mapped dims have size 0: the function's outputs "
                             "cannot be inferred from no call")
        start = _C.get_rng_state()
        results = []
        for b in range(size):
            if randomness == "same":
                _C.set_rng_state(start)
            before = _C.get_rng_state()
            sliced = [x if d is None else x.select(d, b) for x, d in zip(leaves, dims)]
            r = func(*_rebuild(spec, sliced), **kwargs)
            if randomness == "error" and _C.get_rng_state() != before:
                raise RuntimeError("[vmap] the function called a random operation while "
                                   "randomness='error'; pass randomness='different' or "
                                   "'same', or draw the numbers outside vmap")
            results.append(r)
        outs, out_spec = _tree(results[0])
        per = []
        for b, r in enumerate(results):
            lv, sp = _tree(r)
            if sp != out_spec:
                raise RuntimeError(f"[vmap] the function returned different structures for "
                                   f"batch elements 0 and {b}")
            per.append(lv)
        odims = _dims_for(out_dims, results[0], "vmap", "out_dims")
        stacked = []
        for k, (o, d) in enumerate(zip(outs, odims)):
            if not isinstance(o, Tensor):
                raise RuntimeError(f"[vmap] the function must return tensors; output {k} is a "
                                   f"{type(o).__name__}")
            if d is None:
                stacked.append(o)
                continue
            if not -(o.dim() + 1) <= d <= o.dim():
                raise ValueError(f"[vmap] out_dims {d} is out of range for an output of "
                                 f"{o.dim()} dims per element")
            stacked.append(_C.stack([p[k] for p in per], d))
        return _rebuild(out_spec, stacked)

    wrapper.__name__ = f"vmap({getattr(func, '__name__', 'func')})"
    return wrapper


# ---- modules ----

def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """module(*args, **kwargs) with the named parameters and buffers replaced
    by the tensors given (a dict, or a tuple of dicts with no name twice).
    tie_weights: a tensor given for one name of a tied parameter replaces
    every name it is bound to. strict: every parameter and buffer must be
    given, and nothing else."""
    from .nn.utils.stateless import functional_call as call
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        dicts = (dicts,)
    if not isinstance(dicts, (tuple, list)) or not all(isinstance(d, dict) for d in dicts):
        raise TypeError(f"[functional_call] expected a dict or a tuple of dicts, got "
                        f"{type(parameter_and_buffer_dicts).__name__}")
    merged = {}
    for d in dicts:
        for k, v in d.items():
            if k in merged:
                raise ValueError(f"[functional_call] {k!r} appears in more than one dict")
            merged[k] = v
    own = dict(module.named_parameters(remove_duplicate=False))
    own.update(dict(module.named_buffers(remove_duplicate=False)))
    if strict:
        missing = sorted(set(own) - set(merged))
        unexpected = sorted(set(merged) - set(own))
        if missing or unexpected:
            raise RuntimeError(f"[functional_call] strict=True: missing {missing}, unexpected "
                               f"{unexpected}")
    if tie_weights:
        for name, value in list(merged.items()):
            old = own.get(name)
            for other, t in own.items():
                if t is old and other not in merged:
                    merged[other] = value
    if args is None:
        args = ()
    return call(module, merged, args, kwargs)


def stack_module_state(models):
    """(params, buffers): each name's tensors of the models stacked along a
    new dim 0, for vmap over an ensemble; the stacked parameters are new
    leaves that require grad where the models' do."""
    models = list(models)
    if not models:
        raise RuntimeError("[stack_module_state] expected at least one model")
    kind = type(models[0])
    for m in models:
        if type(m) is not kind:
            raise RuntimeError(f"[stack_module_state] models must be of one class: "
                               f"{kind.__name__} and {type(m).__name__}")
        if m.training != models[0].training:
            raise RuntimeError("[stack_module_state] models must be all in training mode or "
                               "all in eval mode")
    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    out_p = {}
    for k in params[0]:
        ts = [p[k] for p in params]
        req = {t.requires_grad for t in ts}
        if len(req) > 1:
            raise RuntimeError(f"[stack_module_state] {k!r} requires grad in some models and "
                               f"not in others")
        out_p[k] = _C.stack([t.detach() for t in ts], 0).requires_grad_(req.pop())
    out_b = {k: _C.stack([b[k] for b in buffers], 0) for k in buffers[0]}
    return out_p, out_b
