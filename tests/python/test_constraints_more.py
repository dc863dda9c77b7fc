"""The constraints added to musa.distributions.constraints (square,
symmetric, positive_semidefinite, lower_triangular, one_hot, multinomial,
cat, stack, dependent_property, is_dependent) against torch 1.13's, and
their errors."""
import importlib

import pytest

import musa
import musa.distributions.constraints as C

torch = pytest.importorskip("torch")


def checks(libname):
    lib = importlib.import_module(libname)
    c = importlib.import_module(libname + ".distributions.constraints")
    t = lib.tensor
    out = []
    for name, vs in {
        "square": [lib.ones(3, 2, 2), lib.ones(2, 3)],
        "symmetric": [t([[1., 2.], [2., 1.]]), t([[1., 2.], [0., 1.]]), lib.ones(2, 3),
                      t([[[1., 1e-7], [0., 1.]], [[1., 1.], [0., 1.]]])],
        "positive_semidefinite": [t([[2., 1.], [1., 2.]]), t([[1., 2.], [2., 1.]]),
                                  t([[0., 0.], [0., 0.]])],
        "lower_triangular": [t([[1., 0.], [2., 1.]]), t([[1., 3.], [2., 1.]]), lib.zeros(3, 2, 2)],
        "one_hot": [t([[0., 1., 0.], [1., 1., 0.], [0., 0., 0.], [0., 0., 1.]])],
    }.items():
        k = getattr(c, name)
        out.append((name, k.event_dim, k.is_discrete, [k.check(v).tolist() for v in vs]))
    m = c.multinomial(3)
    out.append(("multinomial", m.event_dim, m.is_discrete,
                m.check(t([[1., 2.], [2., 2.], [-1., 0.], [0., 0.]])).tolist()))
    k = c.cat([c.positive, c.real, c.integer_interval(0, 2)], dim=0, lengths=[2, 1, 2])
    out.append(("cat", k.event_dim, k.is_discrete, k.check(t([1., -1., -5., 1., 2.5])).tolist()))
    k = c.cat([c.positive, c.unit_interval], dim=-1)
    out.append(("cat2", k.check(t([[1., 0.5], [-1., 2.]])).tolist()))
    k = c.stack([c.positive, c.unit_interval], dim=1)
    out.append(("stack", k.event_dim, k.check(t([[1., 0.5], [-1., 2.]])).tolist()))
    out.append(("dependent", c.is_dependent(c.dependent), c.is_dependent(c.real)))
    return out


def test_against_torch():
    assert checks("musa") == checks("torch")


def test_dependent_property():
    class D:
        @C.dependent_property(is_discrete=False, event_dim=0)
        def support(self):
            return C.interval(0.0, 1.0)

    class E:
        @C.dependent_property
        def support(self):
            return C.real

    assert C.is_dependent(D.support) and D.support.event_dim == 0
    assert not D.support.is_discrete
    assert bool(D().support.check(musa.tensor(0.5))) and C.is_dependent(E.support)
    assert E().support is C.real
    with pytest.raises(ValueError, match="dependent"):
        D.support.check(musa.tensor(0.5))


@pytest.mark.parametrize("call, err, match", [
    (lambda: C.cat([C.real], lengths=[1, 2]), ValueError, "2 lengths for 1 constraints"),
    (lambda: C.cat([C.real, C.real]).check(musa.ones(3)), ValueError, "do not add up"),
    (lambda: C.cat([C.real], dim=2).check(musa.ones(1)), ValueError, "out of range"),
    (lambda: C.stack([C.real]).check(musa.ones(2)), ValueError, "1 constraints for a size of 2"),
    (lambda: C.stack([C.real], dim=-3).check(musa.ones(1, 1)), ValueError, "out of range"),
    (lambda: C.stack([1, 2]), TypeError, "sequence of Constraints"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        call()
