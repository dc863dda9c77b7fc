"""musa.nn core: Parameter, Module bookkeeping, state dicts, hooks, modes,
conversions, reprs and containers."""
import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import musa
import musa.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.bn = nn.BatchNorm1d(3)
        self.fc2 = nn.Linear(3, 2, bias=False)
        self.scale = nn.Parameter(musa.ones(1))
        self.register_buffer("steps", musa.zeros((), dtype=musa.int64))
        self.register_buffer("cache", musa.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(musa.relu(self.bn(self.fc1(x)))) * self.scale


# ---- Parameter ----

def test_parameter_is_a_leaf_sharing_storage():
    data = musa.randn(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, musa.Tensor) and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    with musa.no_grad():
        data.fill_(2.0)
    assert p.tolist() == [[2.0] * 3] * 2
    assert not nn.Parameter(musa.ones(2), requires_grad=False).requires_grad
    assert tuple(nn.Parameter().shape) == (0,)


def test_parameter_of_non_leaf_is_detached():
    x = musa.randn(3, requires_grad=True)
    p = nn.Parameter(x * 2)
    assert p.is_leaf and p.grad_fn is None and p.requires_grad


def test_parameter_repr_matches_torch_format():
    p = nn.Parameter(musa.tensor([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"


def test_parameter_rejects_non_tensors_and_integer_grad():
    with pytest.raises(TypeError, match="Parameter"):
        nn.Parameter([1.0, 2.0])
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(musa.tensor([1, 2]))


def test_parameter_pickle_and_deepcopy_keep_class():
    p = nn.Parameter(musa.randn(3))
    for q in (pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        assert type(q) is nn.Parameter and q.requires_grad
        assert q.tolist() == p.tolist()


# ---- registration and attributes ----

def test_attribute_assignment_registers():
    net = Net()
    assert list(net._parameters) == ["scale"]
    assert list(net._modules) == ["fc1", "bn", "fc2"]
    assert list(net._buffers) == ["steps", "cache"]
    assert net.fc1.weight is net._modules["fc1"]._parameters["weight"]
    assert net.fc2.bias is None


def test_named_parameters_and_buffers():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight"]
    assert [n for n, _ in net.named_parameters(prefix="model", recurse=False)] == ["model.scale"]
    assert [n for n, _ in net.named_buffers()] == [
        "steps", "cache", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert len(list(net.parameters())) == 6 and len(list(net.buffers(recurse=False))) == 2


def test_shared_parameters_and_modules_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert [n for n, _ in seq.named_modules()] == ["", "0", "1"]
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_children_and_modules():
    net = Net()
    assert [n for n, _ in net.named_children()] == ["fc1", "bn", "fc2"]
    assert list(net.children())[1] is net.bn
    assert [n for n, _ in net.named_modules(prefix="m")] == ["m", "m.fc1", "m.bn", "m.fc2"]
    assert len(list(net.modules())) == 4
    assert net.get_submodule("bn") is net.bn and net.get_submodule("") is net
    with pytest.raises(AttributeError, match="no attribute `nope`"):
        net.get_submodule("nope")


def test_reassignment_moves_between_stores():
    net = Net()
    net.scale = None
    assert "scale" in net._parameters and net.scale is None
    net.fc2 = None
    assert net._modules["fc2"] is None and [n for n, _ in net.named_children()] == ["fc1", "bn"]
    net.steps = musa.ones(())
    assert net._buffers["steps"].item() == 1.0
    net.extra = nn.Parameter(musa.ones(2))
    assert "extra" in net._parameters
    with pytest.raises(TypeError, match="as parameter 'extra'"):
        net.extra = nn.Linear(1, 1)  # as in PyTorch: delete the parameter first
    net.bn = nn.Parameter(musa.ones(1))  # a parameter replaces a module
    assert "bn" in net._parameters and "bn" not in net._modules


def test_setattr_type_errors():
    net = Net()
    with pytest.raises(TypeError, match="cannot assign 'musa.Tensor' as parameter 'scale'"):
        net.scale = musa.ones(1)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc1'"):
        net.fc1 = 3
    with pytest.raises(TypeError, match="cannot assign 'str' as buffer 'steps'"):
        net.steps = "x"


def test_register_errors():
    net = Net()
    with pytest.raises(KeyError, match="name can.+t contain"):
        net.register_parameter("a.b", None)
    with pytest.raises(KeyError, match="empty string"):
        net.register_buffer("", None)
    with pytest.raises(TypeError, match="should be a string"):
        net.add_module(3, nn.ReLU())
    with pytest.raises(KeyError, match="attribute 'training' already exists"):
        net.register_buffer("training", musa.ones(1))
    with pytest.raises(TypeError, match="musa.nn.Parameter or None required"):
        net.register_parameter("w", musa.ones(1))
    with pytest.raises(TypeError, match="musa.Tensor or None required"):
        net.register_buffer("b", [1.0])
    with pytest.raises(TypeError, match="is not a Module subclass"):
        net.add_module("m", "relu")


def test_assign_before_init_raises():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(musa.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Bad()


def test_getattr_and_delattr():
    net = Net()
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nothing'"):
        net.nothing
    del net.scale, net.fc1, net.steps
    assert "scale" not in net._parameters and "fc1" not in net._modules and "steps" not in net._buffers
    net.plain = 3
    del net.plain
    assert not hasattr(net, "plain")


def test_dir_lists_members():
    d = dir(Net())
    for name in ("fc1", "scale", "steps", "forward", "training"):
        assert name in d
    assert d == sorted(d)


def test_missing_forward_raises():
    with pytest.raises(NotImplementedError, match=r"Module \[Module\] is missing the required \"forward\""):
        nn.Module()(1)


# ---- state_dict / load_state_dict ----

def test_state_dict_keys_detached_and_keep_vars():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["scale", "steps", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "bn.running_mean",
                        "bn.running_var", "bn.num_batches_tracked", "fc2.weight"]
    assert not sd["fc1.weight"].requires_grad and type(sd["fc1.weight"]) is musa.Tensor
    assert net.state_dict(keep_vars=True)["fc1.weight"] is net.fc1.weight
    assert list(net.state_dict(prefix="p.")).__getitem__(0) == "p.scale"


def test_state_dict_round_trip():
    a, b = Net(), Net()
    a(musa.randn(5, 4))  # updates the batch norm running stats
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and np.array_equal(va.numpy(), vb.numpy())
    assert b.bn.num_batches_tracked.item() == 1
    w = b.fc1.weight
    b.load_state_dict(Net().state_dict())
    assert b.fc1.weight is w  # copied in place


def test_load_state_dict_strict_errors():
    net = Net()
    sd = net.state_dict()
    del sd["fc1.bias"]
    sd["fc1.extra"] = musa.ones(1)
    sd["ghost"] = musa.ones(1)
    with pytest.raises(RuntimeError) as err:
        net.load_state_dict(sd)
    assert str(err.value) == (
        "[Module.load_state_dict] Error(s) in loading state_dict for Net:\n"
        "\tMissing key(s) in state_dict: \"fc1.bias\". \n"
        "\tUnexpected key(s) in state_dict: \"ghost\", \"fc1.extra\". ")
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["fc1.bias"] and result.unexpected_keys == ["ghost", "fc1.extra"]


def test_load_state_dict_shape_mismatch_raises_even_if_not_strict():
    net = Net()
    sd = net.state_dict()
    sd["fc1.weight"] = musa.zeros(2, 2)
    for strict in (True, False):
        with pytest.raises(RuntimeError, match=r"size mismatch for fc1\.weight: copying a param with shape "
                                               r"\(2, 2\) from checkpoint, the shape in current model is "
                                               r"\(3, 4\)"):
            net.load_state_dict(sd, strict=strict)
    with pytest.raises(TypeError, match="dict-like"):
        net.load_state_dict([1, 2])
    sd = net.state_dict()
    sd["fc1.bias"] = [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="expected musa.Tensor"):
        net.load_state_dict(sd)


def test_non_persistent_buffer_is_unexpected_in_state_dict():
    net = Net()
    sd = net.state_dict()
    sd["cache"] = musa.ones(2)
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\) in state_dict: \"cache\""):
        net.load_state_dict(sd)


def test_load_converts_dtype():
    lin = nn.Linear(2, 2)
    sd = {k: v.double() for k, v in nn.Linear(2, 2).state_dict().items()}
    lin.load_state_dict(sd)
    assert lin.weight.dtype == musa.float32
    assert np.allclose(lin.weight.detach().numpy(), sd["weight"].numpy())


def test_state_dict_interchangeable_with_torch():
    torch = pytest.importorskip("torch")
    t = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Flatten(),
                            torch.nn.Linear(3, 2))
    m = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(3, 2))
    assert list(t.state_dict()) == list(m.state_dict())
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 2, 3, 3)).astype(np.float32)
    t.eval(), m.eval()
    np.testing.assert_allclose(m(musa.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


# ---- modes, grads, conversions ----

def test_train_eval_propagate():
    net = Net()
    assert net.training and net.bn.training
    assert net.eval() is net and not net.bn.training and not net.training
    net.train()
    assert net.fc1.training
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")


def test_zero_grad_and_requires_grad():
    net = Net()
    net(musa.randn(4, 4)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    grad = net.fc1.weight.grad
    net.zero_grad(set_to_none=False)
    assert net.fc1.weight.grad is grad and float(grad.abs().sum()) == 0.0
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_dtype_keeps_parameter_objects():
    net = Net()
    net(musa.randn(3, 4)).sum().backward()
    w = net.fc1.weight
    assert net.to(musa.float64) is net
    assert net.fc1.weight is w and isinstance(w, nn.Parameter) and w.dtype == musa.float64
    assert w.grad.dtype == musa.float64 and w.requires_grad
    assert net.bn.running_mean.dtype == musa.float64
    assert net.bn.num_batches_tracked.dtype == musa.int64  # integer buffers keep their dtype
    assert net(musa.randn(3, 4, dtype=musa.float64)).dtype == musa.float64
    net.float()
    assert w.dtype == musa.float32
    net.half()
    assert w.dtype == musa.float16
    net.to(dtype=musa.float32).to("cpu").cpu()
    assert w.dtype == musa.float32
    net.to(musa.zeros(1, dtype=musa.float64))
    assert w.dtype == musa.float64


def test_to_errors():
    net = Net()
    with pytest.raises(TypeError, match="floating point"):
        net.to(musa.int64)
    with pytest.raises(RuntimeError, match="not available"):
        net.to("cuda")
    with pytest.raises(TypeError, match="invalid argument"):
        net.to(3)


def test_type_casts_everything():
    net = Net().type(musa.float64)
    assert net.bn.num_batches_tracked.dtype == musa.float64 and net.scale.dtype == musa.float64


def test_apply_visits_children_first():
    seen = []
    net = Net()
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "BatchNorm1d", "Linear", "Net"]


def test_deepcopy_module():
    net = Net()
    clone = copy.deepcopy(net)
    assert clone.fc1.weight is not net.fc1.weight and isinstance(clone.fc1.weight, nn.Parameter)
    assert np.array_equal(clone.fc1.weight.detach().numpy(), net.fc1.weight.detach().numpy())
    with musa.no_grad():
        clone.fc1.weight.fill_(0.0)
    assert float(net.fc1.weight.abs().sum()) > 0


# ---- hooks ----

def test_forward_hooks_order_replace_and_remove():
    lin = nn.Linear(2, 2)
    calls = []

    def pre(mod, args):
        calls.append("pre")
        return args[0] * 0  # replaces the input (a non-tuple is wrapped)

    def post(mod, args, out):
        calls.append(("post", float(args[0].abs().sum())))
        return out + 1

    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_hook(post)
    out = lin(musa.ones(1, 2))
    assert calls == ["pre", ("post", 0.0)]
    np.testing.assert_allclose(out.detach().numpy(), (lin.bias + 1).detach().numpy()[None], rtol=1e-6)
    h1.remove(), h2.remove(), h2.remove()
    calls.clear()
    lin(musa.ones(1, 2))
    assert calls == []


def test_forward_hook_handle_as_context_manager():
    lin = nn.Linear(2, 2)
    seen = []
    with lin.register_forward_hook(lambda m, a, o: seen.append((m, len(a), tuple(o.shape)))):
        lin(musa.ones(3, 2))
    lin(musa.ones(3, 2))
    assert seen == [(lin, 1, (3, 2))]


def _hooked_linear(lib):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]))
        lin.bias.copy_(lib.tensor([0.1, -0.2]))
    return lin


def _lists(ts):
    return [None if t is None else t.tolist() for t in ts]


def test_full_backward_hook_matches_torch():
    torch = pytest.importorskip("torch")

    def run(lib):
        lin, seen = _hooked_linear(lib), []
        h = lin.register_full_backward_hook(
            lambda m, gi, go: seen.append((m is lin, _lists(gi), _lists(go))))
        x = lib.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], requires_grad=True)
        (lin(x) * lib.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
        seen.append(x.grad.tolist())
        lin(lib.tensor([[1.0, 2.0, 3.0]])).sum().backward()  # no input needs a gradient
        h.remove()
        with lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,)):
            x = lib.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
            lin(x).sum().backward()  # the hook's grad_input replaces the gradient
        seen.append(x.grad.tolist())
        x = lib.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
        lin(x).sum().backward()  # removed: no hook
        seen.append(x.grad.tolist())
        return seen

    got, want = run(musa), run(torch)
    assert got == want and len(got) == 5 and got[2][1] == [None]


def test_full_backward_pre_hook_replaces_grad_output():
    lin, seen = _hooked_linear(musa), []
    lin.register_full_backward_pre_hook(lambda m, go: seen.append(_lists(go)) or (go[0] * 2,))
    x = musa.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    lin(x).sum().backward()
    assert seen == [[[[1.0, 1.0]]]]
    assert x.grad.tolist() == [[4.0, -1.5, 3.0]]  # 2 * (the weight's column sums)
    assert lin.weight.grad.tolist() == [[2.0, 4.0, 6.0], [2.0, 4.0, 6.0]]
    with pytest.raises(RuntimeError, match=r"\[Module.register_full_backward_hook\] a backward "
                                           r"hook must return None or a tuple of 1 gradients"):
        lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
        lin(x).sum().backward()


def test_backward_hooks_on_tuple_outputs_and_non_tensor_arguments():
    class Two(nn.Module):
        def forward(self, a, scale, b):
            return a * scale, b.exp(), "tag"

    m, seen = Two(), []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append((_lists(gi), _lists(go))))
    a = musa.tensor([1.0, 2.0], requires_grad=True)
    b = musa.tensor([0.0], requires_grad=True)
    y, z, tag = m(a, 3.0, b)
    assert tag == "tag"
    (y.sum() + z.sum()).backward()
    assert seen == [([[3.0, 3.0], None, [1.0]], [[1.0, 1.0], [1.0]])]
    with musa.no_grad():  # nothing hooked without grad mode
        m(a, 3.0, b)
    assert len(seen) == 1


# ---- repr ----

def test_repr_nested_matches_torch():
    torch = pytest.importorskip("torch")
    m = nn.Sequential(OrderedDict(
        conv=nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1), act=nn.ReLU(inplace=True),
        block=nn.Sequential(nn.BatchNorm2d(8), nn.Dropout(0.1)), pool=nn.AdaptiveAvgPool2d((1, 1)),
        flat=nn.Flatten(), head=nn.ModuleList([nn.Linear(8, 2), nn.Identity()]),
        d=nn.ModuleDict({"a": nn.LayerNorm([2, 3]), "b": nn.GELU()})))
    tn = torch.nn
    t = tn.Sequential(OrderedDict(
        conv=tn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1), act=tn.ReLU(inplace=True),
        block=tn.Sequential(tn.BatchNorm2d(8), tn.Dropout(0.1)), pool=tn.AdaptiveAvgPool2d((1, 1)),
        flat=tn.Flatten(), head=tn.ModuleList([tn.Linear(8, 2), tn.Identity()]),
        d=tn.ModuleDict({"a": tn.LayerNorm([2, 3]), "b": tn.GELU()})))
    assert repr(m) == repr(t)


def test_layer_reprs_match_torch():
    torch = pytest.importorskip("torch")
    pairs = [
        ("Conv1d", (2, 4, 3), dict(padding="same", dilation=2, bias=False)),
        ("Conv2d", (2, 4, (3, 1)), dict(padding_mode="circular", padding=1, groups=2)),
        ("ConvTranspose2d", (2, 4, 3), dict(stride=2, output_padding=1, dilation=1)),
        ("MaxPool2d", (3,), dict(stride=2, ceil_mode=True)), ("AvgPool2d", ((2, 3),), {}),
        ("BatchNorm1d", (5,), dict(momentum=None, affine=False)), ("GroupNorm", (2, 6), dict(eps=1e-3)),
        ("Embedding", (10, 4), dict(padding_idx=2, max_norm=1.0)), ("LeakyReLU", (0.2,), {}),
        ("ELU", (), dict(alpha=0.5, inplace=True)), ("Softplus", (2, 10), {}), ("Hardtanh", (-2, 2), {}),
        ("SiLU", (), {}), ("Sigmoid", (), {}), ("Tanh", (), {}), ("LogSoftmax", (1,), {}),
        ("GRU", (3, 4, 2), dict(dropout=0.5, bias=False)), ("LSTM", (3, 5), dict(proj_size=2)),
        ("GRUCell", (3, 4), dict(bias=False)), ("MSELoss", (), {}), ("BCEWithLogitsLoss", (), {}),
        ("SmoothL1Loss", (), dict(beta=0.5)), ("NLLLoss", (), {}), ("L1Loss", (), {}), ("BCELoss", (), {}),
    ]
    for name, args, kwargs in pairs:
        ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
        assert repr(ours) == repr(theirs), name


# ---- containers ----

def test_sequential_indexing_and_mutation():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == [b, c]
    x = musa.randn(4, 2)
    np.testing.assert_allclose(seq(x).detach().numpy(), c(b(a(x))).detach().numpy())
    del seq[1]
    assert list(seq._modules) == ["0", "1"] and seq[1] is c
    seq.insert(1, b)
    assert list(seq) == [a, b, c]
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and seq.pop() is not None and len(seq) == 3
    seq[2] = nn.Identity()
    assert isinstance(seq[2], nn.Identity)
    assert len(seq + nn.Sequential(nn.ReLU())) == 4
    with pytest.raises(IndexError, match="index 5 is out of range"):
        seq[5]
    with pytest.raises(TypeError, match="not a Module"):
        seq.insert(0, 3)


def test_sequential_from_ordered_dict():
    seq = nn.Sequential(OrderedDict(first=nn.Linear(2, 2), act=nn.Tanh()))
    assert list(seq._modules) == ["first", "act"] and isinstance(seq[1], nn.Tanh)
    assert isinstance(seq.first, nn.Linear)


def test_module_list():
    ml = nn.ModuleList([nn.Linear(1, 1) for _ in range(3)])
    assert len(ml) == 3 and len(list(ml.parameters())) == 6
    ml += [nn.ReLU()]
    ml.extend([nn.Tanh()])
    assert len(ml) == 5 and isinstance(ml[-1], nn.Tanh)
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2", "3"]
    with pytest.raises(NotImplementedError):
        ml(1)
    with pytest.raises(TypeError, match="iterable"):
        ml.extend(3)


def test_module_dict():
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    md["b"] = nn.ReLU()
    md.update([("c", nn.Tanh())])
    assert list(md) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert list(md.keys()) == ["a", "b", "c"] and isinstance(md.pop("b"), nn.ReLU)
    assert [k for k, _ in md.items()] == ["a", "c"] and len(list(md.values())) == 2
    del md["a"]
    assert list(md) == ["c"]
    md.clear()
    assert len(md) == 0
    with pytest.raises(ValueError, match="pair"):
        md.update([("x",)])
    with pytest.raises(TypeError, match="iterable"):
        md.update(3)


def test_parameter_list():
    pl = nn.ParameterList([nn.Parameter(musa.ones(2)), musa.zeros(3)])
    assert len(pl) == 2 and all(isinstance(p, nn.Parameter) for p in pl)
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pl.append(musa.ones(1))
    pl[0] = musa.full((2,), 5.0)
    assert pl[0].tolist() == [5.0, 5.0] and isinstance(pl[0], nn.Parameter) and len(pl[1:]) == 2
    with pytest.raises(RuntimeError, match="should not be called"):
        pl()
    with pytest.raises(IndexError):
        pl[3]
    with pytest.raises(TypeError, match="iterable"):
        pl.extend(musa.ones(2))


def test_parameter_list_repr_format():
    pl = nn.ParameterList([nn.Parameter(musa.ones(2, 3))])
    assert repr(pl) == "ParameterList(  (0): Parameter containing: [musa.float32 of size 2x3])"  # as torch
    pl.append(musa.ones(4))
    assert repr(pl) == ("ParameterList(\n    (0): Parameter containing: [musa.float32 of size 2x3]\n"
                        "    (1): Parameter containing: [musa.float32 of size 4]\n)")


def test_flatten_unflatten():
    x = musa.randn(2, 3, 4, 5)
    assert tuple(nn.Flatten()(x).shape) == (2, 60)
    assert tuple(nn.Flatten(0, 2)(x).shape) == (24, 5)
    assert tuple(nn.Unflatten(1, (3, 20))(nn.Flatten()(x)).shape) == (2, 3, 20)
    assert tuple(nn.Unflatten(-1, (-1, 2))(musa.randn(3, 8)).shape) == (3, 4, 2)
    with pytest.raises(TypeError, match="tuple of ints"):
        nn.Unflatten(1, 3)


def test_identity_passes_through():
    x = musa.randn(2)
    assert nn.Identity(54, unused="x")(x) is x


def test_training_loop_reduces_loss():
    musa.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    x = musa.randn(64, 2)
    y = (x[:, 0] * x[:, 1] > 0).long()
    loss_fn = nn.CrossEntropyLoss()
    first = None
    for _ in range(100):
        loss = loss_fn(model(x), y)
        first = first if first is not None else loss.item()
        model.zero_grad()
        loss.backward()
        with musa.no_grad():
            for p in model.parameters():
                p.sub_(p.grad * 0.5)
    assert loss.item() < 0.5 * first


def test_parameter_dict_registers_tensors_under_their_keys():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.ParameterDict({"w": musa.ones(2), "b": nn.Parameter(musa.zeros(3))})

    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["p.w", "p.b"]
    assert isinstance(net.p["w"], nn.Parameter) and net.p["w"].requires_grad
    net.p["c"] = musa.full((1,), 2.0)
    net.p.update([("d", musa.ones(4)), ("note", "text")])  # a non-tensor is a plain attribute
    assert list(net.p.keys()) == ["w", "b", "c", "d", "note"] and len(net.p) == 5
    assert list(net.state_dict()) == ["p.w", "p.b", "p.c", "p.d"] and net.p["note"] == "text"
    assert "c" in net.p and "x" not in net.p and net.p.get("x", 7) == 7
    assert net.p.pop("c").tolist() == [2.0] and "p.c" not in net.state_dict()
    assert net.p.popitem()[0] == "note" and net.p.setdefault("e", musa.ones(1)).shape == (1,)
    merged = net.p | {"z": musa.ones(1)}
    assert list(merged.keys()) == ["w", "b", "d", "e", "z"] and "z" not in net.p
    assert musa.equal(merged["w"], net.p["w"])
    # the optimizer trains what the dict holds
    opt = musa.optim.SGD(net.parameters(), lr=0.5)
    (net.p["w"] * 3).sum().backward()
    opt.step()
    assert net.p["w"].tolist() == [-0.5, -0.5]
    loaded = Net()
    loaded.p["d"], loaded.p["e"] = musa.zeros(4), musa.zeros(1)
    loaded.load_state_dict(net.state_dict())
    assert loaded.p["w"].tolist() == [-0.5, -0.5]
    assert "(w): Parameter containing: [musa.float32 of size 2]" in repr(net)
    with pytest.raises(KeyError):
        net.p["missing"]
    with pytest.raises(TypeError, match=r"\[ParameterDict\] keys must be str, got int"):
        net.p[3] = musa.ones(1)
    with pytest.raises(ValueError, match=r"\[ParameterDict.update\] element #0 should be a"):
        net.p.update(["ab"])
    with pytest.raises(RuntimeError, match=r"\[ParameterDict\] ParameterDict should not be called"):
        net.p(1)
    net.p.clear()
    assert len(net.p) == 0 and list(net.parameters()) == []


def test_sync_batch_norm_outside_a_process_group_is_batch_norm():
    musa.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                        nn.Sequential(nn.Flatten(), nn.BatchNorm1d(4 * 9)), nn.InstanceNorm2d(2))
    net[1].running_mean.fill_(0.5)
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert isinstance(conv[1], nn.SyncBatchNorm) and isinstance(conv[3][1], nn.SyncBatchNorm)
    assert isinstance(conv[4], nn.InstanceNorm2d)  # not a batch norm
    assert conv[1].weight is net[1].weight and conv[1].running_mean.tolist() == [0.5] * 4
    assert list(conv.state_dict()) == list(net.state_dict())
    x = musa.randn(6, 4, 5, 5)
    s, b = nn.SyncBatchNorm(4), nn.BatchNorm2d(4)
    for _ in range(2):
        assert musa.allclose(s(x), b(x), atol=1e-6)
    assert musa.allclose(s.running_var, b.running_var) and int(s.num_batches_tracked) == 2
    s.eval(), b.eval()
    assert musa.equal(s(x), b(x))
    assert musa.allclose(nn.SyncBatchNorm(4)(x[:, :, 0]), nn.BatchNorm1d(4)(x[:, :, 0]),
                         atol=1e-6)
