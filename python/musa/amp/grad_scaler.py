"""GradScaler: loss scaling for float16 training (and bfloat16 where
gradients underflow), with PyTorch's algorithm and interface.

scale(loss) multiplies by the current scale. unscale_(optimizer) divides
that optimizer's gradients by it in place and looks for inf/NaN in all of
them with one fused reduction (the joint 2-norm of the list, one pass in
C). step(optimizer) unscales if that has not happened, then steps unless
something was found. update() backs the scale off (x backoff_factor) after
a step with inf/NaN and grows it (x growth_factor) after growth_interval
clean steps in a row.

Eagerly, step reads the check on the host, as PyTorch does. Inside a
musa.jit capture nothing is read on the host: the optimizer's state is
created first (zeros, what its first step starts from), then it steps, and
each parameter and state tensor is selected between its old and new value
by the check (SGD with dampening != 0 makes its momentum on the first step
from the gradient: a skipped first step then leaves zeros where PyTorch
leaves no buffer, and the next step differs). The scale and the
growth tracker are tensors, updated by tensor ops in place: a compiled
step carries them as state.

One difference: a joint gradient norm beyond float32's range (3.4e38) counts
as an overflow; PyTorch checks element by element.
"""
from .. import _C, _capture
from ..autograd import no_grad

_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True); a leading device string ("cpu"),
    as torch.amp.GradScaler takes, is accepted."""

    def __init__(self, device="cpu", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if not isinstance(device, str):  # GradScaler(1024.0): init_scale first
            device, init_scale = "cpu", device
        if device != "cpu":
            raise ValueError(f"[GradScaler] device must be 'cpu', got {device!r}")
        init_scale, growth_factor, backoff_factor = (float(init_scale), float(growth_factor),
                                                     float(backoff_factor))
        if not init_scale > 0:
            raise ValueError(f"[GradScaler] init_scale must be > 0, got {init_scale}")
        if not growth_factor > 1.0:
            raise ValueError(f"[GradScaler] growth_factor should be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"[GradScaler] backoff_factor should be < 1 and > 0, got "
                             f"{backoff_factor}")
        if not isinstance(growth_interval, int) or isinstance(growth_interval, bool) \
                or growth_interval <= 0:
            raise ValueError(f"[GradScaler] growth_interval should be a positive integer, got "
                             f"{growth_interval!r}")
        self._enabled = bool(enabled)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._scale = _C.full((), init_scale, dtype=_C.float32)
        self._growth_tracker = _C.zeros((), dtype=_C.int32)
        self._per_optimizer = {}  # id(optimizer) -> {"stage": ..., "found_inf": 0-d tensor}

    # -- scaling --

    def is_enabled(self):
        return self._enabled

    def scale(self, outputs):
        """outputs (a tensor, or tensors in lists/tuples/dicts) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, _C.Tensor):
            return outputs * self._scale.to(outputs.dtype)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        raise ValueError(f"[GradScaler] scale() takes tensors (or lists/tuples/dicts of them), "
                         f"got {type(outputs).__name__}")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place, and note
        whether any is inf or NaN."""
        if not self._enabled:
            return
        st = self._state(optimizer)
        if st["stage"] == _UNSCALED:
            raise RuntimeError("[GradScaler] unscale_() has already been called on this optimizer "
                               "since the last update().")
        if st["stage"] == _STEPPED:
            raise RuntimeError("[GradScaler] unscale_() is being called after step().")
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        for g in grads:
            if g.dtype == _C.float16:
                raise ValueError("[GradScaler] Attempting to unscale FP16 gradients.")
        with no_grad():
            inv = self._scale.double().reciprocal().float()
            for g in grads:
                g.mul_(inv.to(g.dtype))
            if grads:
                from .._functions import isfinite, norm
                found = _C.logical_not(isfinite(norm(grads))).float()
            else:
                found = _C.zeros((), dtype=_C.float32)
        st["found_inf"] = found
        st["stage"] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """unscale_ if needed, then optimizer.step(*args, **kwargs) unless a
        gradient was inf or NaN. Returns the step's result (None if skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("[GradScaler] Closure use is not currently supported if GradScaler "
                               "is enabled.")
        st = self._state(optimizer)
        if st["stage"] == _STEPPED:
            raise RuntimeError("[GradScaler] step() has already been called since the last "
                               "update().")
        if st["stage"] == _READY:
            self.unscale_(optimizer)
        found = st["found_inf"]
        st["stage"] = _STEPPED
        if _capture.capturing():
            return self._select_step(optimizer, found, args, kwargs)
        if float(found.item()) != 0.0:
            return None
        return optimizer.step(*args, **kwargs)

    def _select_step(self, optimizer, found, args, kwargs):
        """Step, then keep the old values where the check found inf/NaN: no
        host read, so a capture stays one plan."""
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        prepare = getattr(optimizer, "_prepare_state", None)
        for g in optimizer.param_groups if prepare else ():
            prepare(g)  # the state the step would create exists before the snapshot
        with no_grad():
            old = [(p.detach().clone(), {k: v.clone() for k, v in optimizer.state[p].items()
                                         if isinstance(v, _C.Tensor)}) for p in params]
        res = optimizer.step(*args, **kwargs)
        with no_grad():
            skip = found != 0
            for p, (op, ostate) in zip(params, old):
                p.copy_(_C.where(skip, op, p))
                for k, v in optimizer.state[p].items():
                    if isinstance(v, _C.Tensor):
                        before = ostate.get(k)
                        v.copy_(_C.where(skip, before if before is not None else
                                         _C.zeros_like(v), v))
        return res

    def update(self, new_scale=None):
        """Set the next scale: new_scale (a float or a 0-d tensor) if given,
        else backed off after inf/NaN, or grown after growth_interval clean
        steps. Resets every optimizer's stage."""
        if not self._enabled:
            return
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, _C.Tensor):
                    if new_scale.numel() != 1:
                        raise ValueError("[GradScaler] new_scale should be a float or a 1-element "
                                         "tensor")
                    self._scale.copy_(new_scale.reshape(()).float())
                else:
                    self._scale.fill_(float(new_scale))
            else:
                founds = [s["found_inf"] for s in self._per_optimizer.values()
                          if s["found_inf"] is not None]
                if not founds:
                    raise RuntimeError("[GradScaler] No inf checks were recorded prior to "
                                       "update.")
                found = founds[0]
                for f in founds[1:]:
                    found = found + f
                bad = found != 0
                tracker = self._growth_tracker + 1
                grow = tracker >= self._growth_interval
                scale = self._scale
                new = _C.where(bad, scale * self._backoff_factor,
                               _C.where(grow, scale * self._growth_factor, scale))
                self._scale.copy_(new)
                self._growth_tracker.copy_(_C.where(bad | grow, _C.zeros_like(tracker), tracker))
        self._per_optimizer = {}

    # -- state --

    def get_scale(self):
        """The current scale as a float (1.0 when disabled)."""
        return float(self._scale.item()) if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, v):
        self._growth_factor = float(v)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, v):
        self._backoff_factor = float(v)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, v):
        self._growth_interval = int(v)

    def state_dict(self):
        """The scale, the factors, the interval and the growth tracker
        (PyTorch's keys); empty when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": int(self._growth_tracker.item())}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("[GradScaler] The source state dict is empty, possibly because it "
                               "was saved from a disabled instance of GradScaler.")
        self._scale.fill_(float(state_dict["scale"]))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker.fill_(int(state_dict["_growth_tracker"]))

    def __repr__(self):
        return (f"musa.amp.GradScaler(scale={self.get_scale()}, growth_factor="
                f"{self._growth_factor}, backoff_factor={self._backoff_factor}, growth_interval="
                f"{self._growth_interval}, enabled={self._enabled})")
