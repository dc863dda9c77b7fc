"""musa.compile (PyTorch 2's torch.compile) and musa.compiler: the module
wrapper and its training against eager step for step, functions and the
decorator form, fullgraph, the backends, modes and options, reset, and the
argument errors."""
import copy

import pytest

import musa
import musa.nn as nn


def mlp():
    musa.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.0), nn.Linear(16, 3))


def test_compiled_module_trains_like_eager_step_for_step():
    eager = mlp()
    model = copy.deepcopy(eager)
    compiled = musa.compile(model)
    assert isinstance(compiled, musa.compiler.OptimizedModule)
    assert isinstance(compiled, nn.Module)
    assert compiled._orig_mod is model
    # PyTorch's layout: the module's state under _orig_mod, the same tensors
    assert list(compiled.state_dict()) == ["_orig_mod." + k for k in model.state_dict()]
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in model.parameters()]
    opt_e = musa.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = musa.optim.SGD(compiled.parameters(), lr=0.1, momentum=0.9)
    musa.manual_seed(1)
    batches = [(musa.randn(8, 6), musa.randint(0, 3, (8,))) for _ in range(4)]
    for x, y in batches:
        losses = []
        for net, opt in ((eager, opt_e), (compiled, opt_c)):
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss))
        assert losses[0] == losses[1]
    for a, b in zip(eager.parameters(), model.parameters()):
        assert bool((a == b).all())
    assert compiled.__dict__["_compiled_forward"].compiles >= 1


def test_train_and_eval_reach_the_wrapped_module_and_attributes_read_through():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    compiled = musa.compile(model)
    compiled.eval()
    assert not model.training and not model[1].training
    x = musa.randn(16, 4)
    assert bool((compiled(x) == model(x)).all())  # eval: no dropout in the plan either
    compiled.train()
    assert model.training
    assert compiled[0] is model[0] if hasattr(type(compiled), "__getitem__") else True
    model.extra = 7
    assert compiled.extra == 7
    with pytest.raises(AttributeError):
        compiled.no_such_attribute
    assert "OptimizedModule" in repr(compiled)


def test_function_and_decorator_forms():
    def f(x, y):
        return (x * y).sin() + 1

    x, y = musa.randn(5), musa.randn(5)
    g = musa.compile(f)
    assert bool((g(x, y) == f(x, y)).all())
    assert g.compiles == 1

    @musa.compile(mode="reduce-overhead")
    def h(x):
        return x.exp() - 1

    assert bool((h(x) == x.exp() - 1).all())
    assert h.compiles == 1


def test_fullgraph_refuses_a_graph_break_before_running():
    ran = []

    def f(x):
        ran.append(1)
        if x.sum() > 0:
            return x
        return -x

    g = musa.compile(f, fullgraph=True)
    with pytest.raises(RuntimeError,
                       match=r"\[compile\] fullgraph=True, but .*f is not one graph.*t.item\(\)"):
        g(musa.ones(3))
    # the symbolic capture stopped at the host read: the body ran once, on
    # meta tensors, and nothing was computed or cached
    assert not g._cache
    # without fullgraph the graph is cut there, and both outcomes are right
    h = musa.compile(f)
    assert bool((h(musa.ones(3)) == 1).all())
    assert bool((h(-musa.ones(3)) == 1).all())


def test_fullgraph_accepts_one_graph():
    g = musa.compile(lambda x: x.relu() * 2, fullgraph=True)
    x = musa.randn(4, 4)
    assert bool((g(x) == x.relu() * 2).all())


def test_backends():
    assert musa.compiler.list_backends() == ["inductor", "musa"]
    assert musa.compiler.list_backends(()) == ["aot_eager", "eager", "inductor", "musa"]
    model = mlp()
    eager_backend = musa.compile(model, backend="eager")
    assert eager_backend.__dict__["_compiled_forward"] is None  # runs the module as written
    x = musa.randn(2, 6)
    assert bool((eager_backend(x) == model(x)).all())

    def f(x):
        return x + 1

    assert musa.compile(f, backend="eager") is f
    assert musa.compile(f, backend="aot_eager").compiles == 0  # compiled, on its first call
    assert musa.compile(f, disable=True) is f
    assert musa.compile(model, disable=True) is model


def test_options_are_config_settings():
    g = musa.compile(lambda x: x * 2, options={"memory_budget": 1 << 30, "fusion_level": 1})
    assert g.config.memory_budget == 1 << 30 and g.config.fusion_level == 1
    cfg = musa.Config(remat=False)
    assert musa.compile(lambda x: x, options=cfg).config is cfg


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(mode="fastest"), RuntimeError, r"\[compile\] unrecognized mode='fastest'"),
    (dict(mode="default", options={}), RuntimeError, "either mode or options"),
    (dict(backend="tvm"), ValueError, r"\[compile\] invalid backend 'tvm'"),
    (dict(backend=lambda gm, inputs: gm), NotImplementedError, "torch.fx.GraphModule"),
    (dict(options={"triton.cudagraphs": True}), ValueError, "unknown option 'triton.cudagraphs'"),
    (dict(options=[1]), TypeError, "options must be a dict"),
    (dict(options={"fusion_level": 5}), ValueError, r"\[Config\] fusion_level"),
    (dict(dynamic="yes"), TypeError, "dynamic must be None, True or False"),
    (dict(fullgraph=1), TypeError, "fullgraph must be a bool"),
])
def test_argument_errors(kwargs, err, match):
    with pytest.raises(err, match=match):
        musa.compile(lambda x: x, **kwargs)


def test_not_callable():
    with pytest.raises(TypeError, match=r"\[compile\] expected a function or a Module, got int"):
        musa.compile(3)


def test_dynamic_true_compiles_per_shape():
    g = musa.compile(lambda x: x * 3, dynamic=True)
    for n in (2, 3, 4):
        x = musa.randn(n)
        assert bool((g(x) == x * 3).all())
    assert g.compiles == 3


def test_reset_and_is_compiling():
    seen = []

    def f(x):
        seen.append(musa.compiler.is_compiling())
        return x + 1

    g = musa.compile(f)
    x = musa.randn(3)
    g(x)
    g(x)
    assert g.compiles == 1 and seen == [True]
    musa.compiler.reset()
    assert bool((g(x) == x + 1).all())
    assert g.compiles == 2 and seen == [True, True]
    assert musa.compiler.is_compiling() is False


def test_copies_and_pickles_compile_again():
    import pickle
    musa.manual_seed(0)
    compiled = musa.compile(nn.Linear(3, 2), fullgraph=True, options={"fusion_level": 1})
    x = musa.randn(4, 3)
    y = compiled(x)
    for twin in (copy.deepcopy(compiled), pickle.loads(pickle.dumps(compiled))):
        assert twin._orig_mod is not compiled._orig_mod
        run = twin.__dict__["_compiled_forward"]
        assert run._fullgraph and run.config.fusion_level == 1 and run.compiles == 0
        assert bool((twin(x) == y).all()) and run.compiles == 1
    eager = copy.deepcopy(musa.compile(nn.Linear(3, 2), backend="eager"))
    assert eager.__dict__["_compiled_forward"] is None
