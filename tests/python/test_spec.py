"""The SPEC's snippets that exist so far, run as written (sections 1, 4
dynamic clipping, and the engineering tools built by now)."""
import musa
import musa.nn as nn


def _model_with_grads(scale):
    musa.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    loss = (model(musa.randn(16, 4)) * scale).pow(2).sum()
    loss.backward()
    return model


def _clip_as_in_spec(model, max_norm):
    # --- SPEC section 4, "Gradient clipping, dynamic", as written ---
    grad_norm = musa.norm([p.grad for p in model.parameters()])
    scale = max_norm / (grad_norm + 1e-6)
    if scale < 1:
        for p in model.parameters():
            p.grad *= scale
    # ---
    return grad_norm


def test_dynamic_clipping_snippet_both_regimes():
    for scale, max_norm in [(100.0, 1.0), (0.001, 1000.0)]:
        model = _model_with_grads(scale)
        before = [p.grad.clone() for p in model.parameters()]
        norm = _clip_as_in_spec(model, max_norm)
        total = sum(float((g * g).sum()) for g in before) ** 0.5
        assert abs(norm.item() - total) <= 1e-4 * total
        after = musa.norm([p.grad for p in model.parameters()]).item()
        if total > max_norm:  # clipped to max_norm
            assert abs(after - max_norm) <= 1e-4 * max_norm
        else:  # untouched
            assert all(musa.equal(p.grad, g) for p, g in zip(model.parameters(), before))


def test_clip_grad_norm_matches_the_snippet():
    a, b = _model_with_grads(100.0), _model_with_grads(100.0)
    _clip_as_in_spec(a, 1.0)
    nn.utils.clip_grad_norm_(b.parameters(), 1.0)
    for p, q in zip(a.parameters(), b.parameters()):
        assert musa.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7)


def test_engineering_tools_that_exist():
    x = musa.randn(3, dtype=musa.float64, requires_grad=True)
    assert musa.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
    n = musa.get_num_threads()
    musa.set_num_threads(8)
    assert musa.get_num_threads() == 8
    musa.set_num_threads(n)
