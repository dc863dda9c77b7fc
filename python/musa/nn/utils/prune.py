"""musa.nn.utils.prune: PyTorch's pruning (torch.nn.utils.prune).

Pruning parameter `name` of a module moves the parameter to `name_orig`,
adds a buffer `name_mask` (1 keeps an entry, 0 prunes it), and registers
the method as a forward pre-hook that sets the attribute `name` to
`name_orig * name_mask` before each call, so gradients reach `name_orig`
through the mask. Pruning a tensor again combines the methods in a
PruningContainer: the new method only sees what earlier ones kept (the
entries still 1 for unstructured and global methods, the channels still
in use for structured ones). remove() makes the pruning permanent:
`name` is a parameter again, holding the masked values.

Methods: Identity, RandomUnstructured, L1Unstructured, RandomStructured,
LnStructured, CustomFromMask; the functions identity, random_unstructured,
l1_unstructured, random_structured, ln_structured, global_unstructured,
custom_from_mask, remove and is_pruned. `amount` is a fraction in [0, 1]
(rounded to a count as round(amount * n)) or a count of entries (or
channels) to prune.
"""
import numbers
from abc import ABC, abstractmethod

from ... import _C

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _check_amount(amount, who):
    ok = (isinstance(amount, numbers.Integral) and not isinstance(amount, bool) and amount >= 0) \
        or (isinstance(amount, float) and 0.0 <= amount <= 1.0)
    if not ok:
        raise ValueError(f"[{who}] amount={amount!r} should either be a float in the range "
                         f"[0, 1] or a non-negative integer")


def _to_prune(amount, size, who):
    """How many of size entries (or channels) amount prunes."""
    if isinstance(amount, numbers.Integral):
        if amount > size:
            raise ValueError(f"[{who}] amount={amount} should be smaller than the number of "
                             f"parameters to prune={size}")
        return int(amount)
    return round(amount * size)


def _check_structured(t, dim, who):
    if t.dim() <= 1:
        raise ValueError(f"[{who}] structured pruning can only be applied to "
                         f"multidimensional tensors; found a tensor of shape {tuple(t.shape)} "
                         f"with {t.dim()} dims")
    if not -t.dim() <= dim < t.dim():
        raise IndexError(f"[{who}] dim {dim} is out of range for a tensor of {t.dim()} dims")
    return dim % t.dim()


class BasePruningMethod(ABC):
    """A pruning method: compute_mask(t, default_mask) gives the mask of t,
    where default_mask holds what earlier prunings left (1 kept, 0 pruned)."""

    _tensor_name = None
    PRUNING_TYPE = None  # "unstructured", "structured" or "global"

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask of t (the same shape)."""

    def apply_mask(self, module):
        """name_orig * name_mask of module: the pruned tensor."""
        if self._tensor_name is None:
            raise RuntimeError(f"[prune] {type(self).__name__} has not been applied to a "
                               f"module yet")
        orig = getattr(module, self._tensor_name + "_orig")
        return orig * getattr(module, self._tensor_name + "_mask")

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune module's tensor `name` with cls(*args, **kwargs): the mask
        is computed from importance_scores when given, else from the tensor."""
        from ..parameter import Parameter
        old_key, old = None, None
        for k, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                old_key, old = k, hook
        method = cls(*args, **kwargs)
        method._tensor_name = name
        hook = method
        if old is not None:
            hook = old if isinstance(old, PruningContainer) else PruningContainer(old)
            hook.add_pruning_method(method)
        orig = getattr(module, name, None)
        if not isinstance(orig, _C.Tensor):
            raise AttributeError(f"[prune] {type(module).__name__} has no parameter or buffer "
                                 f"{name!r}")
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(orig.shape):
            raise ValueError(f"[prune] importance_scores of shape "
                             f"{tuple(importance_scores.shape)} should have the shape of "
                             f"{name!r}, {tuple(orig.shape)}")
        if old is None:
            if name not in module._parameters:
                raise ValueError(f"[prune] {name!r} of {type(module).__name__} is not a "
                                 f"parameter (buffers are not pruned)")
            default_mask = _C.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        scores = orig if importance_scores is None else importance_scores
        mask = hook.compute_mask(scores.detach(), default_mask=default_mask)
        if old is None:
            param = module._parameters.pop(name)
            module.register_parameter(name + "_orig", param if isinstance(param, Parameter)
                                      else Parameter(param))
            module.register_buffer(name + "_mask", mask)
        else:
            module._buffers[name + "_mask"] = mask
            del module._forward_pre_hooks[old_key]
        setattr(module, name, hook.apply_mask(module))
        module.register_forward_pre_hook(hook)
        return hook

    def prune(self, t, default_mask=None, importance_scores=None):
        """t pruned by this method's mask (computed from importance_scores
        when given), without a module."""
        if importance_scores is not None and tuple(importance_scores.shape) != tuple(t.shape):
            raise ValueError("[prune] importance_scores should have the shape of t")
        scores = t if importance_scores is None else importance_scores
        mask = self.compute_mask(scores.detach(),
                                 _C.ones_like(t) if default_mask is None else default_mask)
        return t * mask

    def remove(self, module):
        """Make the pruning permanent: `name` becomes a parameter holding the
        masked values; name_orig and name_mask go."""
        from ... import no_grad
        name = self._tensor_name
        weight = self.apply_mask(module)
        if name in module.__dict__:
            del module.__dict__[name]
        orig = module._parameters.pop(name + "_orig")
        del module._buffers[name + "_mask"]
        with no_grad():
            orig.copy_(weight)
        setattr(module, name, orig)


class PruningContainer(BasePruningMethod):
    """Methods applied one after another to one tensor: each computes its
    mask over what the ones before kept."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1 and not isinstance(args[0], BasePruningMethod):
            args = tuple(args[0])
        for m in args:
            self.add_pruning_method(m)

    def add_pruning_method(self, method):
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"[PruningContainer] {type(method).__name__} is not a "
                            f"BasePruningMethod")
        if method is None:
            return
        if self._tensor_name is None:
            self._tensor_name = method._tensor_name
        elif method._tensor_name != self._tensor_name:
            raise ValueError(f"[PruningContainer] can only add methods acting on the tensor "
                             f"{self._tensor_name!r}; found {method._tensor_name!r}")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, i):
        return self._pruning_methods[i]

    def compute_mask(self, t, default_mask):
        """The last method's mask over what default_mask keeps, the entries
        it already prunes left pruned."""
        method = self._pruning_methods[-1]
        new = default_mask.clone()
        if method.PRUNING_TYPE == "global":  # a mask of the whole tensor (CustomFromMask)
            return method.compute_mask(t, default_mask=new)
        if method.PRUNING_TYPE == "unstructured":
            flat_mask = default_mask.reshape(-1)
            keep = (flat_mask == 1).nonzero().reshape(-1)
            part = method.compute_mask(t.reshape(-1).index_select(0, keep),
                                       default_mask=flat_mask.index_select(0, keep))
            flat = new.reshape(-1)
            flat.index_copy_(0, keep, part.to(new.dtype))
            return flat.reshape(t.shape)
        if method.PRUNING_TYPE == "structured":
            dim = _check_structured(t, method.dim, type(method).__name__)
            others = [d for d in range(t.dim()) if d != dim]
            keep = (default_mask.sum(others) != 0).nonzero().reshape(-1)
            part = method.compute_mask(t.index_select(dim, keep),
                                       default_mask=default_mask.index_select(dim, keep))
            return new.index_copy(dim, keep, part.to(new.dtype))
        raise ValueError(f"[PruningContainer] unrecognized PRUNING_TYPE "
                         f"{method.PRUNING_TYPE!r} of {type(method).__name__}")


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (a hook and a mask to start from)."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _zero_at(mask, flat_indices):
    mask = mask.clone()
    flat = mask.reshape(-1)
    flat.index_fill_(0, flat_indices, 0)
    return flat.reshape(mask.shape)


class _Unstructured(BasePruningMethod):
    """Prunes the `amount` entries of lowest score (_scores: one per entry)."""
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _check_amount(amount, type(self).__name__)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _to_prune(self.amount, t.numel(), type(self).__name__)
        if k == 0:
            return default_mask.clone()
        return _zero_at(default_mask, self._scores(t).reshape(-1).topk(k, largest=False).indices)


class RandomUnstructured(_Unstructured):
    """Prunes `amount` entries chosen at random (the default generator)."""

    def _scores(self, t):
        return _C.rand_like(t)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_Unstructured):
    """Prunes the `amount` entries of smallest magnitude."""

    def _scores(self, t):
        return t.abs()

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _channels_mask(t, dim, channels):
    """Zeros like t with ones in the given channels (indices along dim)."""
    shape = [1] * t.dim()
    shape[dim] = t.shape[dim]
    sel = _C.zeros(t.shape[dim], dtype=t.dtype).index_fill(0, channels, 1)
    return _C.zeros_like(t) + sel.reshape(shape)


class _Structured(BasePruningMethod):
    """Prunes `amount` whole channels along dim: all but the n - amount
    channels of highest score (_scores: one per channel)."""
    PRUNING_TYPE = "structured"

    def compute_mask(self, t, default_mask):
        who = type(self).__name__
        dim = _check_structured(t, self.dim, who)
        n = t.shape[dim]
        k = _to_prune(self.amount, n, who)
        if k == 0:
            return default_mask
        keep = self._scores(t, dim).topk(n - k, largest=True).indices
        return _channels_mask(t, dim, keep) * default_mask.to(t.dtype)


class RandomStructured(_Structured):
    """Prunes `amount` whole channels along dim, chosen at random."""

    def __init__(self, amount, dim=-1):
        _check_amount(amount, "RandomStructured")
        self.amount, self.dim = amount, dim

    def _scores(self, t, dim):
        return _C.rand(t.shape[dim])

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_Structured):
    """Prunes the `amount` channels along dim of smallest L`n` norm (n: a
    number, inf, -inf, "fro", or "nuc" over two remaining dims)."""

    def __init__(self, amount, n, dim=-1):
        _check_amount(amount, "LnStructured")
        self.amount, self.n, self.dim = amount, n, dim

    def _scores(self, t, dim):
        from ... import linalg
        others = tuple(d for d in range(t.dim()) if d != dim)
        if self.n == "nuc":
            if len(others) != 2:
                raise ValueError(f"[LnStructured] n='nuc' needs exactly two dims besides dim; "
                                 f"the tensor has shape {tuple(t.shape)}")
            return linalg.matrix_norm(t.movedim(dim, 0), "nuc", dim=(1, 2))
        order = 2 if self.n == "fro" else self.n
        if not isinstance(order, numbers.Real):
            raise ValueError(f"[LnStructured] n={self.n!r}: a number, inf, -inf, 'fro' or "
                             f"'nuc'")
        return linalg.vector_norm(t, order, dim=others)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given mask is 0."""
    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise ValueError(f"[CustomFromMask] the mask has shape {tuple(self.mask.shape)}, "
                             f"the tensor {tuple(default_mask.shape)}")
        return default_mask * self.mask.to(default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Prune nothing of module's `name`, adding its hook and an all-ones mask."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def custom_from_mask(module, name, mask):
    CustomFromMask.apply(module, name, mask)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) pairs of parameters together: the method
    (an unstructured one, such as L1Unstructured) sees all their entries
    as one vector, so amount counts across them."""
    try:
        parameters = list(parameters)
    except TypeError:
        raise TypeError("[global_unstructured] parameters must be an iterable of "
                        "(module, name) pairs") from None
    importance_scores = importance_scores or {}
    if not isinstance(importance_scores, dict):
        raise TypeError("[global_unstructured] importance_scores must be a dict keyed by "
                        "(module, name)")
    scores, masks = [], []
    for module, name in parameters:
        p = getattr(module, name)
        scores.append(importance_scores.get((module, name), p).detach().reshape(-1))
        masks.append(getattr(module, name + "_mask", _C.ones_like(p)).reshape(-1))
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError(f"[global_unstructured] only unstructured methods prune globally; "
                        f"found {pruning_method.__name__} of type {method.PRUNING_TYPE!r}")
    container = PruningContainer(method)
    if not parameters:
        return
    final = container.compute_mask(_C.cat(scores), default_mask=_C.cat(masks))
    at = 0
    for module, name in parameters:
        p = getattr(module, name)
        n = p.numel()
        custom_from_mask(module, name, final[at:at + n].reshape(p.shape))
        at += n


def remove(module, name):
    """Make the pruning of module's `name` permanent (see
    BasePruningMethod.remove) and drop its hook."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"[prune.remove] parameter {name!r} of {type(module).__name__} has to be "
                     f"pruned before pruning can be removed")


def is_pruned(module):
    """Whether module or one of its submodules has a pruning hook."""
    return any(isinstance(h, BasePruningMethod) for _, m in module.named_modules()
               for h in m._forward_pre_hooks.values())
