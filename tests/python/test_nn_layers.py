"""musa.nn layers against torch.nn with identical weights: outputs, input and
parameter gradients, running statistics, default initialisations, errors."""
import math

import numpy as np
import pytest

import musa
import musa.nn as nn

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(1)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def twin(name, *args, **kwargs):
    """The same layer in musa and torch, musa's state copied from torch's."""
    t = getattr(torch.nn, name)(*args, **kwargs)
    m = getattr(nn, name)(*args, **kwargs)
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    return m, t


def run_both(m, t, *arrays, rtol=1e-5, atol=1e-6, out_index=None):
    """Forward both layers on the arrays, backward a random cotangent, and
    compare outputs, input gradients and parameter gradients."""
    ms = [musa.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    mo, to = m(*ms), t(*ts)
    if out_index is not None:
        mo, to = mo[out_index], to[out_index]
    assert tuple(mo.shape) == tuple(to.shape)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    cot = randn(*to.shape)
    mo.backward(musa.tensor(cot))
    to.backward(torch.tensor(cot))
    for a, b in zip(ms, ts):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=10 * atol)
    tp = dict(t.named_parameters())
    for name, p in m.named_parameters():
        if tp[name].grad is None:
            assert p.grad is None, name
        else:
            np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=rtol, atol=10 * atol,
                                       err_msg=name)
    return mo


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias):
    m, t = twin("Linear", 5, 3, bias=bias)
    run_both(m, t, randn(2, 4, 5))
    run_both(*twin("Linear", 5, 3, bias=bias), randn(5))


@pytest.mark.parametrize("shape", [(512, 128, 384), (64, 64, 128), (7, 33, 5), (2, 30000, 3), (0, 8, 4),
                                   (3, 0, 4)])
def test_linear_bias_kernel(shape):
    """A float32 linear with a bias (one oneDNN matmul, the bias in its
    epilogue): float64's result within float32 rounding, the same bits on 1
    and 2 threads (a compiled step and eager must agree), empty sizes."""
    M, K, N = shape
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (N, K), (N,)))
    want = x.astype(np.float64) @ w.astype(np.float64).T + b
    outs = []
    old = musa.get_num_threads()
    try:
        for threads in (1, 2):
            musa.set_num_threads(threads)
            outs.append(musa.nn.functional.linear(musa.tensor(x), musa.tensor(w), musa.tensor(b)).numpy())
    finally:
        musa.set_num_threads(old)
    assert outs[0].shape == (M, N)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4 * math.sqrt(max(K, 1)))


CONVS = [
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, dilation=2, groups=2), (2, 4, 13)),
    ("Conv1d", (4, 6, 4), dict(padding="same", padding_mode="reflect"), (2, 4, 13)),
    ("Conv1d", (4, 6, 3), dict(), (4, 13)),
    ("Conv2d", (4, 6, 3), dict(), (2, 4, 7, 8)),
    ("Conv2d", (4, 6, (3, 2)), dict(stride=(2, 1), padding=(1, 2), groups=2, bias=False), (2, 4, 7, 8)),
    ("Conv2d", (4, 6, 3), dict(padding="same", dilation=2), (2, 4, 7, 8)),
    ("Conv2d", (4, 6, 3), dict(padding=1, padding_mode="reflect"), (2, 4, 7, 8)),
    ("Conv2d", (4, 6, 3), dict(padding=(2, 1), padding_mode="replicate"), (2, 4, 7, 8)),
    ("Conv2d", (4, 6, 3), dict(padding=1, padding_mode="circular", stride=2), (2, 4, 7, 8)),
    ("Conv2d", (4, 6, 4), dict(padding="same", padding_mode="circular"), (1, 4, 7, 8)),
    ("Conv2d", (4, 6, 3), dict(padding=1), (4, 7, 8)),
    ("ConvTranspose2d", (4, 6, 3), dict(stride=2, padding=1, output_padding=1), (2, 4, 5, 6)),
    ("ConvTranspose2d", (4, 6, (3, 2)), dict(stride=(2, 3), groups=2, dilation=(2, 1), bias=False),
     (2, 4, 5, 6)),
]


@pytest.mark.parametrize("name,args,kw,shape", CONVS)
def test_convolutions(name, args, kw, shape):
    run_both(*twin(name, *args, **kw), randn(*shape), rtol=1e-4, atol=1e-5)


def test_conv_transpose2d_output_size():
    m, t = twin("ConvTranspose2d", 3, 2, 3, stride=2, padding=1)
    x = randn(1, 3, 4, 5)
    for size in ([8, 10], [1, 2, 7, 9], (8, 9)):
        mo = m(musa.tensor(x), output_size=size)
        to = t(torch.tensor(x), output_size=size)
        np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="requested an output size of \\[12, 9\\]"):
        m(musa.tensor(x), output_size=[12, 9])


def test_conv_constructor_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="groups must be a positive integer"):
        nn.Conv2d(2, 4, 3, groups=0)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(2, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv1d(2, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="invalid padding string"):
        nn.Conv2d(2, 4, 3, padding="full")
    with pytest.raises(ValueError, match="only 'zeros'"):
        nn.ConvTranspose2d(2, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="expected 2 values"):
        nn.Conv2d(2, 4, (3, 3, 3))


POOLS = [("MaxPool2d", (3,), dict(stride=2, padding=1, ceil_mode=True)),
         ("MaxPool2d", ((2, 3),), dict(dilation=2)),
         ("AvgPool2d", (3,), dict(stride=2, padding=1, count_include_pad=False)), ("AvgPool2d", (2,), {}),
         ("AdaptiveAvgPool2d", ((3, None),), {}), ("AdaptiveAvgPool2d", (1,), {})]


@pytest.mark.parametrize("name,args,kw", POOLS)
def test_pooling(name, args, kw):
    run_both(*twin(name, *args, **kw), randn(2, 3, 9, 10))


def test_max_pool_return_indices():
    m, t = twin("MaxPool2d", 2, return_indices=True)
    run_both(m, t, randn(2, 3, 6, 6), out_index=0)
    x = randn(2, 3, 6, 6)
    np.testing.assert_array_equal(m(musa.tensor(x))[1].numpy(), t(torch.tensor(x))[1].numpy())


@pytest.mark.parametrize("name,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (8, 3, 5)),
                                        ("BatchNorm2d", (4, 3, 5, 6))])
@pytest.mark.parametrize("kw", [dict(), dict(momentum=None), dict(affine=False, momentum=0.5),
                                dict(track_running_stats=False), dict(eps=1e-2)])
def test_batch_norm_train_then_eval(name, shape, kw):
    m, t = twin(name, 3, **kw)
    for _ in range(3):
        run_both(m, t, randn(*shape) * 2 + 1)
    for (k, a), b in zip(m.state_dict().items(), t.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    m.eval(), t.eval()
    run_both(m, t, randn(*shape))
    if m.track_running_stats:
        assert m.num_batches_tracked.item() == 3


def test_batch_norm_defaults_and_errors():
    bn = nn.BatchNorm2d(4)
    assert bn.weight.tolist() == [1.0] * 4 and bn.bias.tolist() == [0.0] * 4
    assert bn.running_mean.tolist() == [0.0] * 4 and bn.running_var.tolist() == [1.0] * 4
    assert bn.num_batches_tracked.dtype == musa.int64 and bn.num_batches_tracked.item() == 0
    with pytest.raises(ValueError, match=r"^\[BatchNorm2d\] expected 4D input \(got 3D input"):
        bn(musa.randn(2, 4, 5))
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        nn.BatchNorm1d(4)(musa.randn(2, 4, 5, 5))
    bn.running_mean.fill_(3.0)
    bn.num_batches_tracked.fill_(7)
    bn.reset_running_stats()
    assert bn.running_mean.tolist() == [0.0] * 4 and bn.num_batches_tracked.item() == 0
    assert nn.BatchNorm1d(3, track_running_stats=False).running_mean is None


@pytest.mark.parametrize("args,kw", [((5,), {}), (([4, 5],), dict(eps=1e-3)),
                                     ((5,), dict(elementwise_affine=False))])
def test_layer_norm(args, kw):
    m, t = twin("LayerNorm", *args, **kw)
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.randn(p.shape))
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    run_both(m, t, randn(2, 3, 4, 5))


def test_layer_norm_without_bias():
    ln = nn.LayerNorm(4, bias=False)
    assert ln.bias is None and [n for n, _ in ln.named_parameters()] == ["weight"]
    x = musa.randn(2, 4)
    np.testing.assert_allclose(ln(x).detach().numpy(), nn.LayerNorm(4, elementwise_affine=False)(x).numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(affine):
    m, t = twin("GroupNorm", 3, 6, affine=affine)
    run_both(m, t, randn(2, 6, 4, 3))
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)


def test_embedding_padding_row_gets_no_gradient():
    m, t = twin("Embedding", 7, 3, padding_idx=2)
    idx = np.array([[0, 2, 4], [2, 2, 6]])
    out = run_both(m, t, idx)
    assert m.weight.grad[2].tolist() == [0.0] * 3
    assert tuple(out.shape) == (2, 3, 3)


def test_embedding_init_and_errors():
    musa.manual_seed(0)
    e = nn.Embedding(2000, 8, padding_idx=-1)
    w = e.weight.detach().numpy()
    assert e.padding_idx == 1999 and (w[1999] == 0).all()
    assert abs(w[:1999].mean()) < 0.03 and abs(w[:1999].std() - 1) < 0.03
    with pytest.raises(ValueError, match="padding_idx \\(5\\) must be within num_embeddings \\(5\\)"):
        nn.Embedding(5, 2, padding_idx=5)
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(5, 2, sparse=True)
    with pytest.raises(IndexError, match=r"\[embedding\] index out of range"):
        nn.Embedding(5, 2)(musa.tensor([5]))


def test_embedding_from_pretrained():
    w = musa.randn(4, 3)
    e = nn.Embedding.from_pretrained(w)
    assert not e.weight.requires_grad and e.weight.tolist() == w.tolist()
    assert nn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    assert e(musa.tensor([3])).tolist() == [w[3].tolist()]
    with pytest.raises(ValueError, match="2-D"):
        nn.Embedding.from_pretrained(musa.randn(3))


def test_embedding_max_norm():
    m, t = twin("Embedding", 6, 3, max_norm=0.5)
    idx = np.array([1, 3, 3])
    run_both(m, t, idx)
    np.testing.assert_allclose(m.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-5)


def test_dropout_train_and_eval():
    d = nn.Dropout(0.4)
    x = musa.ones(20000)
    y = d(x).numpy()
    assert abs((y == 0).mean() - 0.4) < 0.02 and np.allclose(y[y != 0], 1 / 0.6)
    d.eval()
    assert d(x) is x
    assert nn.Dropout(0.0)(x) is x
    with pytest.raises(ValueError, match="between 0 and 1, but got -0.1"):
        nn.Dropout(-0.1)


def test_dropout_inplace_keeps_gradient():
    x = musa.ones(1000, requires_grad=True)
    h = x * 2
    y = nn.Dropout(0.5, inplace=True)(h)
    assert y is h
    y.sum().backward()
    kept = h.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 4.0, 0.0))


ACTIVATIONS = [("ReLU", (), {}), ("ReLU", (), dict(inplace=True)), ("ReLU6", (), {}),
               ("LeakyReLU", (0.3,), {}), ("LeakyReLU", (), dict(inplace=True)), ("ELU", (0.5,), {}),
               ("GELU", (), {}), ("GELU", ("tanh",), {}), ("SiLU", (), dict(inplace=True)),
               ("Softplus", (2.0, 3.0), {}), ("Hardtanh", (-0.5, 0.25), {}),
               ("Sigmoid", (), {}), ("Tanh", (), {}), ("Softmax", (1,), {}), ("LogSoftmax", (-1,), {})]


@pytest.mark.parametrize("name,args,kw", ACTIVATIONS)
def test_activation_layers_after_linear(name, args, kw):
    # after a Linear, so that in-place variants act on a non-leaf
    mlin, tlin = twin("Linear", 4, 6)
    m, t = twin(name, *args, **kw)
    run_both(nn.Sequential(mlin, m), torch.nn.Sequential(tlin, t), randn(5, 4) * 2)


def test_hardtanh_bounds_checked():
    with pytest.raises(ValueError, match="cannot be greater"):
        nn.Hardtanh(1.0, -1.0)


LOSSES = [
    ("CrossEntropyLoss", dict(), "index"),
    ("CrossEntropyLoss", dict(ignore_index=1, reduction="sum"), "index"),
    ("CrossEntropyLoss", dict(label_smoothing=0.15, reduction="none"), "index"),
    ("CrossEntropyLoss", dict(weight=True, label_smoothing=0.1), "index"),
    ("CrossEntropyLoss", dict(), "prob"), ("NLLLoss", dict(), "index"),
    ("NLLLoss", dict(weight=True), "index"), ("MSELoss", dict(), "real"),
    ("L1Loss", dict(reduction="sum"), "real"), ("SmoothL1Loss", dict(beta=0.5), "real"),
    ("BCELoss", dict(), "prob01"), ("BCELoss", dict(weight=True), "prob01"),
    ("BCEWithLogitsLoss", dict(), "prob01"),
    ("BCEWithLogitsLoss", dict(pos_weight=True, reduction="none"), "prob01"),
]


@pytest.mark.parametrize("name,kw,target", LOSSES)
def test_loss_layers(name, kw, target):
    x = randn(6, 5)
    if name == "BCELoss":
        x = 1 / (1 + np.exp(-x))
    if target == "index":
        y = RNG.integers(0, 5, 6)
    elif target == "prob":
        y = np.exp(randn(6, 5))
        y = y / y.sum(1, keepdims=True)
    elif target == "prob01":
        y = RNG.random((6, 5))
    else:
        y = randn(6, 5)
    y = y.astype(np.float32) if y.dtype.kind == "f" else y
    w = np.abs(randn(5)) + 0.2
    mkw, tkw = dict(kw), dict(kw)
    for key in ("weight", "pos_weight"):
        if kw.get(key):
            mkw[key], tkw[key] = musa.tensor(w), torch.tensor(w)
    m, t = getattr(nn, name)(**mkw), getattr(torch.nn, name)(**tkw)
    run_both(m, t, x.astype(np.float32), y)
    if "weight" in kw:
        assert "weight" in m.state_dict()


def test_loss_bad_reduction():
    with pytest.raises(ValueError, match=r"^\[MSELoss\] reduction must be"):
        nn.MSELoss(reduction="avg")


def test_linear_and_conv_default_init():
    musa.manual_seed(0)
    lin = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) gives the same bound as the bias
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    conv = nn.Conv2d(8, 16, 3)
    bound = 1 / math.sqrt(8 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= bound
    assert np.abs(conv.bias.detach().numpy()).max() <= bound
    convt = nn.ConvTranspose2d(8, 16, 3, groups=2)
    assert tuple(convt.weight.shape) == (8, 8, 3, 3)
    assert np.abs(convt.weight.detach().numpy()).max() <= 1 / math.sqrt(8 * 9)


def test_dtype_factory_argument():
    assert nn.Linear(2, 3, dtype=musa.float64).weight.dtype == musa.float64
    assert nn.BatchNorm1d(3, dtype=musa.float64).running_var.dtype == musa.float64
    with pytest.raises(RuntimeError, match="not available"):
        nn.Linear(2, 3, device="cuda")


def test_cnn_end_to_end_against_torch():
    tn = torch.nn
    t = tn.Sequential(tn.Conv2d(3, 8, 3, padding=1), tn.BatchNorm2d(8), tn.ReLU(), tn.MaxPool2d(2),
                      tn.Conv2d(8, 8, 3, padding=1, groups=2), tn.GroupNorm(2, 8), tn.GELU(),
                      tn.AdaptiveAvgPool2d(1), tn.Flatten(), tn.Dropout(0.0), tn.Linear(8, 4),
                      tn.LayerNorm(4))
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.GroupNorm(2, 8), nn.GELU(),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.0), nn.Linear(8, 4),
                      nn.LayerNorm(4))
    m.load_state_dict({k: musa.tensor(v.numpy()) for k, v in t.state_dict().items()})
    run_both(m, t, randn(4, 3, 8, 8), rtol=1e-4, atol=1e-5)
