"""Optimizer: the base of musa.optim, with PyTorch's interface.

An optimizer holds ``param_groups`` (dicts with a ``params`` list and the
group's options, missing options filled from ``defaults``) and ``state``
(a dict keyed by parameter). ``state_dict()`` replaces parameters by their
index in group order, so a saved state loads into an optimizer built over
other tensors of the same layout.

Subclasses implement ``_step_group(group)``, which updates every parameter
of the group that has a gradient through the optimizer's update op row
(one C call per group, whose rows run as one multi-tensor kernel; see
_update); ``step`` runs the closure, then each group, under no_grad. The
arithmetic lives only in the rows' kernels, so eager and compiled steps are
the same computation.
"""
import functools
import warnings
from collections import defaultdict
from collections.abc import Iterable
from copy import deepcopy
from itertools import chain

from .. import _C, _capture
from ..autograd import enable_grad, no_grad

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Marks an option (SGD's lr) that has no default."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _counted(step):
    # Counts optimizer steps, so LR schedulers can warn when they are stepped first.
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        self._step_count = getattr(self, "_step_count", 0) + 1
        return step(self, *args, **kwargs)
    wrapper._counted = True
    return wrapper


def _check(name, what, value, ok):
    """Raise ValueError("[SGD] Invalid learning rate: -1") unless ok."""
    if not ok:
        raise ValueError(f"[{name}] Invalid {what}: {value}")


def _update(op, rows, **attrs):
    """Run the update row `op` (sgd_update, ...) over rows of (param,
    state..., grad, lr) tensors in one C call (musa_update_multi), writing
    each parameter and its state in place: every row is checked first, then
    eager rows run as one multi-tensor kernel, with the results of one
    dispatch per row. Under a musa.jit capture each row is dispatched and
    recorded like any op."""
    _C._update(op, rows, attrs)


_UNGUARDED = ("params", "lr")


def state_keys_of(states):
    """Which state each parameter has (the optimizer-state guard's value):
    tuple(map(tuple, states)), built in C."""
    return _C._keys_of_each(states)


def _guard_options(group, states, state_keys=None):
    """While capturing, key the compiled step on the group's options other
    than lr (they are attributes of the recorded update rows; lr is read at
    run time) and on which state exists (state_keys: the keys the recorded
    update assumed, when they differ from the keys now)."""
    if not _capture.capturing():
        return

    # checked at every compiled call: kept cheap (in C, called from C with no
    # Python frame; no sort: insertion order)
    opts = functools.partial(_C._items_except, group, _UNGUARDED)
    keys = functools.partial(_C._keys_of_each, states)

    _capture.guard(("optim-group", id(group)), opts, opts(), "optimizer options")
    # lr is read at run time, from the group: a change the function makes
    # after this update (a scheduler's step) a compiled call would not make
    _capture.fixed(("optim-lr", id(group)), functools.partial(group.__getitem__, "lr"),
                   group["lr"], "the optimizer's lr")
    _capture.guard(("optim-state", id(group)), keys, keys() if state_keys is None else state_keys,
                   "optimizer state")


def _new_state(fn, *args, **kwargs):
    """A state tensor (zeros): made unrecorded while capturing, since state
    outlives a compiled run and is bound into it by reference."""
    with _capture.outside_capture():
        return fn(*args, **kwargs)


def _scalar_state(s, key, default):
    """The state's scalar `key` (step counters, ASGD's eta and mu, NAdam's
    mu_product) as the 0-d float64 tensor the update rows read and write (a
    state_dict may hold a number or another dtype); default when absent."""
    st = s.get(key)
    if not isinstance(st, _C.Tensor) or st.dtype != _C.float64 or st.dim() != 0:
        s[key] = _new_state(_C.full, (), float(st if st is not None else default), dtype=_C.float64)
    return s[key]


def _step_tensor(s):
    """The state's step counter as the 0-d float64 tensor the update rows
    count in."""
    return _scalar_state(s, "step", 0)


class _ParamGroup(dict):
    """A parameter group: a dict, as in torch, whose learning rate is also
    held in a 0-d float64 tensor (lr_tensor()). Update rows read that tensor
    when they run, so eager steps and compiled steps take lr one way, and a
    scheduler's change reaches a compiled step without recompiling."""

    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value)
        if key == "lr":
            self._sync_lr()

    def _sync_lr(self):
        t = self.__dict__.get("_lr")
        if t is not None and self.__dict__.get("_lr_value") != self["lr"]:
            with _capture.outside_capture():
                t.fill_(float(self["lr"]))
            self._lr_value = self["lr"]

    def lr_tensor(self):
        """The 0-d float64 tensor holding this group's lr (made on first use)."""
        if self.__dict__.get("_lr") is None:
            self._lr = _new_state(_C.full, (), float(self["lr"]), dtype=_C.float64)
            self._lr_value = self["lr"]
        else:
            self._sync_lr()  # lr set through dict methods that skip __setitem__
        return self._lr


def _expanded(t):
    # Autograd may leave a broadcast (stride-0) view in .grad, e.g. after x.sum().backward().
    return any(st == 0 and n > 1 for st, n in zip(t.stride(), t.shape))


class Optimizer:
    """Base class of optimizers. params: an iterable of Tensors, or of dicts
    each giving a group's 'params' and options overriding defaults."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        self._step_count = 0
        name = type(self).__name__
        if isinstance(params, _C.Tensor):
            raise TypeError(f"[{name}] params must be an iterable of Tensors or dicts, not a Tensor")
        groups = list(params)
        if not groups:
            raise ValueError(f"[{name}] optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_counted", False):
            cls.step = _counted(step)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        state = dict(state)
        state["param_groups"] = [g if isinstance(g, _ParamGroup) else _ParamGroup(g)
                                 for g in state["param_groups"]]
        self.__dict__.update(state)
        self.__dict__.setdefault("_step_count", 0)
        for group in self.param_groups:  # options added since the state was saved
            for key, default in self.defaults.items():
                if default is not required:
                    group.setdefault(key, default)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with 'params' and options);
        options it does not give take the optimizer's defaults."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"[{name}] a param group must be a dict, not {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, _C.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(f"[{name}] parameters must be in an ordered collection (a list), not a set, "
                            "so their order is the same between runs")
        param_group["params"] = params = list(params)
        for p in params:
            if not isinstance(p, _C.Tensor):
                raise TypeError(f"[{name}] can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not (p.is_leaf or getattr(p, "retains_grad", False)):
                raise ValueError(f"[{name}] can't optimize a non-leaf Tensor")
        for key, default in self.defaults.items():
            if default is required and key not in param_group:
                raise ValueError(f"[{name}] parameter group didn't specify a value of required "
                                 f"optimization parameter {key}")
            param_group.setdefault(key, default)
        if len(params) != len(set(params)):
            warnings.warn(f"[{name}] a parameter group contains duplicate parameters", stacklevel=3)
        seen = set(chain.from_iterable(g["params"] for g in self.param_groups))
        if not seen.isdisjoint(params):
            raise ValueError(f"[{name}] some parameters appear in more than one parameter group")
        self.param_groups.append(_ParamGroup(param_group))

    def zero_grad(self, set_to_none=True):
        """Reset the gradients: to None (the default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                elif _expanded(g):
                    p.grad = _C.zeros_like(g)  # an expanded view cannot be written in place
                else:
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    g.zero_()

    @_counted
    def step(self, closure=None):
        """Update the parameters once; closure, if given, re-evaluates the
        model (with grad enabled) and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group):
        raise NotImplementedError(f"[{type(self).__name__}] does not implement step")

    def _prepare_state(self, group):
        """Create the state the group's next step would create (subclasses
        with state override this); returns (params, grads, states)."""
        return self._with_grad(group)

    def _with_grad(self, group):
        """The group's parameters that have a gradient, with the gradients
        and their state dicts."""
        params, grads, states = [], [], []
        for p in group["params"]:
            g = p.grad
            if g is not None:
                params.append(p)
                grads.append(g)
                states.append(self.state[p])
        return params, grads, states

    def state_dict(self):
        """{'state': {index: state}, 'param_groups': [group with 'params' as
        indices]}; indices count parameters across groups in order. The
        state tensors are shared, not copied."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, _C.Tensor) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a state from state_dict() (deep-copied; floating state
        tensors other than 'step' are cast to their parameter's dtype)."""
        name = type(self).__name__
        state_dict = deepcopy(state_dict)
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError(f"[{name}] loaded state dict has {len(saved)} parameter groups, "
                             f"the optimizer has {len(groups)}")
        for i, (g, s) in enumerate(zip(groups, saved)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(f"[{name}] loaded state dict's parameter group {i} has {len(s['params'])} "
                                 f"parameters, the optimizer's has {len(g['params'])}")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, _C.Tensor):
                if key != "step" and param.is_floating_point() and value.is_floating_point():
                    value = value.to(param.dtype)
                return value
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        new_groups = []
        for g, s in zip(groups, saved):
            s["params"] = g["params"]
            new_groups.append(s)
        self.__setstate__({"state": state, "param_groups": new_groups})
