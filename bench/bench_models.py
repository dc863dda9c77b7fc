"""The benchmark models, each written once against a library namespace (``lib``
is ``musa`` or ``torch``: ``lib.nn``, ``lib.nn.functional``, ``lib.tril``...),
so one definition builds both the musa model and the PyTorch model, with the
GEMM FLOPs of one training step counted from the same shapes.

Models (bench/bench_train.py trains them, bench/bench_jit.py runs ResNet-18
inference):
- mlp: the digits MLP 64-128-128-10;
- gpt: GPT-tiny, a decoder-only transformer (token and learned position
  embeddings, pre-LayerNorm blocks of causal self-attention written with
  matmuls, a masked fill and softmax, and a 4x GELU MLP; final LayerNorm, LM
  head);
- resnet18: the CIFAR ResNet-18 (3x32x32 inputs).

FLOP counting (``*_flops``): only GEMM-like work, convolutions and matmuls,
at 2 FLOPs per multiply-add. A GEMM ``(m, k) @ (k, n)`` in a training step
costs ``2mkn`` forward, ``2mkn`` for the gradient of its weight (or second
operand) and ``2mkn`` for the gradient of its input, 3 x 2mkn in all, except
where the input is the data (the first layer of the MLP and ResNet-18): no
one asks for that gradient, so it is not computed and not counted.
Elementwise ops, normalisation, softmax, pooling, embedding lookups, the loss
and the optimizer are not counted: the figure is a GEMM count, to be set
against the machine's sgemm rate.
"""
import math


def gemm_flops(m, k, n, input_grad=True):
    """FLOPs of the GEMM (m, k) @ (k, n) in one training step: forward, the
    weight-side gradient, and the input-side gradient unless input_grad is
    False (the input is data that needs no gradient)."""
    return 2 * m * k * n * (3 if input_grad else 2)


def conv_flops(batch, cin, cout, k, h_out, w_out, input_grad=True):
    """A k x k convolution as the GEMM it is: (batch*h_out*w_out, cin*k*k) @
    (cin*k*k, cout)."""
    return gemm_flops(batch * h_out * w_out, cin * k * k, cout, input_grad)


# ---- MLP 64-128-128-10 ----

MLP_SIZES = (64, 128, 128, 10)


def mlp(lib):
    nn = lib.nn
    a, b, c, d = MLP_SIZES
    return nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, c), nn.ReLU(), nn.Linear(c, d))


def mlp_flops(batch):
    sizes = MLP_SIZES
    return sum(gemm_flops(batch, sizes[i], sizes[i + 1], input_grad=i > 0)
               for i in range(len(sizes) - 1))


# ---- GPT-tiny ----

GPT = dict(vocab=256, seq=64, d_model=128, heads=4, blocks=2)


def gpt_tiny(lib, vocab=GPT["vocab"], seq=GPT["seq"], d_model=GPT["d_model"],
             heads=GPT["heads"], blocks=GPT["blocks"], sdpa=False):
    """A decoder-only transformer taking tokens (B, T <= seq) to next-token
    logits (B, T, vocab). Attention is written out (no fused kernel) so that
    both libraries run the same matmuls; with sdpa, a library that has
    F.scaled_dot_product_attention (musa; not PyTorch 1.13) calls that
    instead (the gpt-sdpa model)."""
    nn, F = lib.nn, lib.nn.functional
    sdpa = sdpa and hasattr(F, "scaled_dot_product_attention")
    hd = d_model // heads

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d_model)
            self.qkv = nn.Linear(d_model, 3 * d_model)  # q, k, v for every head at once
            self.proj = nn.Linear(d_model, d_model)
            self.ln2 = nn.LayerNorm(d_model)
            self.fc = nn.Linear(d_model, 4 * d_model)
            self.out = nn.Linear(4 * d_model, d_model)
            # True above the diagonal: a position sees itself and the past
            self.register_buffer("future", lib.tril(lib.ones(seq, seq)) == 0)

        def attend(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=2)             # (B, T, C) each
            q = q.reshape(B, T, heads, hd).transpose(1, 2)    # (B, heads, T, hd)
            k = k.reshape(B, T, heads, hd).transpose(1, 2)
            v = v.reshape(B, T, heads, hd).transpose(1, 2)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return self.proj(y.transpose(1, 2).reshape(B, T, C))
            att = q.matmul(k.transpose(2, 3)) * (1.0 / math.sqrt(hd))  # (B, heads, T, T)
            att = F.softmax(att.masked_fill(self.future[:T, :T], float("-inf")), dim=-1)
            y = att.matmul(v)                                 # (B, heads, T, hd)
            return self.proj(y.transpose(1, 2).reshape(B, T, C))

        def forward(self, x):
            x = x + self.attend(self.ln1(x))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPTTiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d_model)
            self.pos = nn.Embedding(seq, d_model)  # learned position embedding
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.ln = nn.LayerNorm(d_model)
            self.head = nn.Linear(d_model, vocab)
            self.register_buffer("positions", lib.arange(seq))

        def forward(self, tokens):
            T = tokens.shape[1]
            h = self.tok(tokens) + self.pos(self.positions[:T])
            return self.head(self.ln(self.blocks(h)))

    return GPTTiny()


def gpt_flops(batch, seq=GPT["seq"], d_model=GPT["d_model"], heads=GPT["heads"],
              blocks=GPT["blocks"], vocab=GPT["vocab"]):
    tokens = batch * seq
    hd = d_model // heads
    per_block = (gemm_flops(tokens, d_model, 3 * d_model)          # qkv
                 + gemm_flops(tokens, d_model, d_model)            # proj
                 + gemm_flops(tokens, d_model, 4 * d_model)        # fc
                 + gemm_flops(tokens, 4 * d_model, d_model)        # out
                 # q @ k^T and att @ v: batch*heads GEMMs each, both operands need
                 # gradients
                 + batch * heads * (gemm_flops(seq, hd, seq) + gemm_flops(seq, seq, hd)))
    # the embeddings are lookups (their gradients scatter-adds), not GEMMs
    return blocks * per_block + gemm_flops(tokens, d_model, vocab)


# ---- ResNet-18 (CIFAR) ----

RESNET_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, first stride)


def resnet18(lib, classes=10):
    """The CIFAR ResNet-18 (3x32x32 inputs)."""
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                           nn.BatchNorm2d(cout))

        def forward(self, x):
            h = F.relu(self.b1(self.c1(x)))
            h = self.b2(self.c2(h))
            return F.relu(h + (x if self.short is None else self.short(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU())
            layers, cin = [], 64
            for cout, stride in RESNET_STAGES:
                layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.fc = nn.Linear(512, classes)

        def forward(self, x):
            h = self.layers(self.stem(x))
            return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))

    return ResNet18()


def resnet18_flops(batch, size=32, classes=10):
    """The convolutions of resnet18() walked with their output sizes (3x3
    padding 1 and 1x1 convolutions: out = in / stride), plus the fc layer."""
    total = conv_flops(batch, 3, 64, 3, size, size, input_grad=False)  # stem: its input is data
    cin = 64
    for cout, stride in RESNET_STAGES:
        for first in (True, False):
            s = stride if first else 1
            size //= s
            total += conv_flops(batch, cin, cout, 3, size, size)      # c1
            total += conv_flops(batch, cout, cout, 3, size, size)     # c2
            if s != 1 or cin != cout:
                total += conv_flops(batch, cin, cout, 1, size, size)  # shortcut
            cin = cout
    return total + gemm_flops(batch, 512, classes)


# ---- the table's models: shapes, data, FLOPs ----

class Spec:
    """One model of the table: its builder and FLOP counter, batch, default
    training steps, and how to make a batch."""

    def __init__(self, label, build, flops, batch, steps, make_batch):
        self.label = label            # printed above the model's rows
        self.build = build            # build(lib) -> module
        self.flops = flops            # GEMM FLOPs of one training step at self.batch
        self.batch = batch            # samples per step
        self.steps = steps            # timed steps by default (after the first)
        self.make_batch = make_batch  # make_batch(lib) -> (input, target)


def _image_batch(batch, shape, classes):
    return lambda lib: (lib.randn(batch, *shape), lib.randint(0, classes, (batch,)))


def _token_batch(batch, seq, vocab):
    def make(lib):
        # random tokens: inputs are positions 0..T-1, targets the next token
        t = lib.randint(0, vocab, (batch, seq + 1))
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()
    return make


MODELS = {
    "mlp": Spec("MLP 64-128-128-10, batch 64", mlp, mlp_flops(64), 64, 300,
                _image_batch(64, (64,), 10)),
    "gpt": Spec("GPT-tiny (2 blocks, d_model 128, 4 heads, T 64, vocab 256), batch 8 "
                "(512 tokens)", gpt_tiny, gpt_flops(8), 8, 40,
                _token_batch(8, GPT["seq"], GPT["vocab"])),
    "gpt-sdpa": Spec("GPT-tiny as above, its attention by F.scaled_dot_product_attention "
                     "(musa's fused kernel; written out for PyTorch 1.13)",
                     lambda lib: gpt_tiny(lib, sdpa=True), gpt_flops(8), 8, 40,
                     _token_batch(8, GPT["seq"], GPT["vocab"])),
    "resnet18": Spec("ResNet-18 (CIFAR, 3x32x32), batch 32", resnet18, resnet18_flops(32), 32, 14,
                     _image_batch(32, (3, 32, 32), 10)),
}
