"""L-BFGS, as torch.optim.LBFGS: limited-memory BFGS over all parameters
as one flat vector, with an optional strong-Wolfe line search (cubic
interpolation, Nocedal & Wright's algorithms 3.5 and 3.6). step(closure)
re-evaluates the model as often as the search needs."""
from .. import _C
from ..autograd import enable_grad, no_grad
from .optimizer import Optimizer, _check

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, lo=None, hi=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2),
    kept in [lo, hi] (the interval of the two points by default)."""
    lo, hi = (min(x1, x2), max(x1, x2)) if lo is None else (lo, hi)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2
    d2 = disc ** 0.5
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step t along d satisfying the strong Wolfe conditions (sufficient
    decrease c1, curvature c2), found by bracketing then zooming with cubic
    interpolation. evaluate(t) -> (loss, flat grad) at x + t d. Returns
    (loss, grad, t, evaluations)."""
    d_max = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    bracket = None
    done = False
    for _ in range(max_ls):
        if f_new > f + c1 * t * gtd or (evals > 1 and f_new >= f_prev):
            bracket = [(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new, gtd_new)]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, done = [(t, f_new, g_new, gtd_new)], True
            break
        if gtd_new >= 0:
            bracket = [(t_prev, f_prev, g_prev, gtd_prev), (t, f_new, g_new, gtd_new)]
            break
        # extrapolate: between a little past t and ten times t
        lo, hi = t + 0.01 * (t - t_prev), t * 10
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, lo, hi)
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new.clone(), gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
    else:  # no bracket within max_ls evaluations: take the last point
        bracket = [(0.0, f, g, gtd), (t, f_new, g_new, gtd_new)]

    # zoom: shrink the bracket until a point satisfies both conditions
    stalled = False
    while not done and evals < max_ls:
        (ta, fa, ga, gtda), (tb, fb, gb, gtdb) = bracket
        if abs(tb - ta) * d_max < tolerance_change:
            break
        t = _cubic_min(ta, fa, gtda, tb, fb, gtdb)
        # keep clear of the ends: within 10% of the bracket, move in (or, twice running, out)
        lo, hi = min(ta, tb), max(ta, tb)
        eps = 0.1 * (hi - lo)
        if min(hi - t, t - lo) < eps:
            if stalled or t >= hi or t <= lo:
                t = hi - eps if abs(t - hi) < abs(t - lo) else lo + eps
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        low = 0 if fa <= fb else 1  # the end with the lower loss
        high = 1 - low
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = (t, f_new, g_new, gtd_new)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                bracket[low] = (t, f_new, g_new, gtd_new)
                done = True
                break
            if gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = (t, f_new, g_new, gtd_new)
    best = min(bracket, key=lambda b: b[1]) if not done else \
        next(b for b in bracket if b[0] == t)
    return best[1], best[2], best[0], evals


class LBFGS(Optimizer):
    """L-BFGS over every parameter as one vector (one parameter group).
    step(closure) needs the closure, which zeroes the gradients, computes
    the loss, calls backward and returns the loss; it runs up to max_iter
    iterations (max_eval closure calls, default max_iter * 5 / 4). With
    line_search_fn="strong_wolfe" each step length comes from a strong
    Wolfe search; without, it is lr (the first scaled by the gradient)."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check("LBFGS", "learning rate", lr, 0.0 <= lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"[LBFGS] only 'strong_wolfe' is supported as line_search_fn, got "
                             f"{line_search_fn!r}")
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size,
                        line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("[LBFGS] doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        parts = [(p.grad if p.grad is not None else _C.zeros_like(p)).reshape(-1)
                 for p in self._params]
        return _C.cat(parts, 0) if parts else _C.zeros(0)

    def _add(self, t, d):
        """params += t * d (d flat)."""
        k = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[k:k + n].reshape(p.shape) * t)
            k += n

    def _set(self, values):
        for p, v in zip(self._params, values):
            p.copy_(v)

    def _evaluate(self, closure):
        with enable_grad():
            loss = float(closure())
        return loss, self._flat_grad()

    def step(self, closure=None):
        if closure is None:
            raise RuntimeError("[LBFGS] step needs a closure that re-evaluates the model and "
                               "returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        with no_grad():
            g = self._flat_grad()
            if float(g.abs().max()) <= tol_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            dirs, steps, rho = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            h_diag, prev_g, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), \
                state.get("prev_loss")
            it = 0
            while it < max_iter:
                it += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = g.neg()
                    dirs, steps, rho, h_diag = [], [], [], 1.0
                else:
                    y, s = g - prev_g, d * t
                    ys = float(y.dot(s))
                    if ys > 1e-10:  # keep the pair only when curvature is positive
                        if len(dirs) == group["history_size"]:
                            dirs.pop(0), steps.pop(0), rho.pop(0)
                        dirs.append(y)
                        steps.append(s)
                        rho.append(1.0 / ys)
                        h_diag = ys / float(y.dot(y))
                    # two-loop recursion: d = -H g
                    q = g.neg()
                    alpha = [0.0] * len(dirs)
                    for i in range(len(dirs) - 1, -1, -1):
                        alpha[i] = float(steps[i].dot(q)) * rho[i]
                        q = q - dirs[i] * alpha[i]
                    d = q * h_diag
                    for i in range(len(dirs)):
                        beta = float(dirs[i].dot(d)) * rho[i]
                        d = d + steps[i] * (alpha[i] - beta)
                prev_g, prev_loss = g.clone(), loss
                t = min(1.0, 1.0 / float(g.abs().sum())) * lr if state["n_iter"] == 1 else lr
                gtd = float(g.dot(d))
                if gtd > -tol_change:  # not a descent direction
                    break
                if group["line_search_fn"] == "strong_wolfe":
                    x0 = [p.clone() for p in self._params]

                    def evaluate(step):
                        self._set(x0)
                        self._add(step, d)
                        return self._evaluate(closure)

                    loss, g, t, n = _strong_wolfe(evaluate, t, d, loss, g, gtd,
                                                  tolerance_change=tol_change)
                    self._set(x0)
                    self._add(t, d)
                    g = g.clone()
                else:
                    self._add(t, d)
                    n = 0
                    if it != max_iter:
                        loss, g = self._evaluate(closure)
                        n = 1
                evals += n
                state["func_evals"] += n
                if it == max_iter or evals >= max_eval:
                    break
                if float(g.abs().max()) <= tol_grad:
                    break
                if float((d * t).abs().max()) <= tol_change:
                    break
                if abs(loss - prev_loss) < tol_change:
                    break
            state.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=rho, H_diag=h_diag,
                         prev_flat_grad=prev_g, prev_loss=prev_loss)
        return orig_loss

    def _step_group(self, group):  # (step is overridden; kept for the base class)
        raise RuntimeError("[LBFGS] step needs a closure")
