"""Recurrent layers: RNN, LSTM, GRU and their single-step cells.

All share one cell function per mode and one multi-layer driver (_run).
Gates are stacked in PyTorch's order -- LSTM (i, f, g, o), GRU (r, z, n) --
and parameters carry PyTorch's names (weight_ih_l0, bias_hh_l1_reverse, ...),
so state dicts are interchangeable. Inside the driver sequences are
time-major: x (T, N, features), states (layers * directions, N, hidden).
"""
import math
import warnings
from collections import namedtuple

from ... import _C
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _pack_like, pad_packed_sequence
from .module import Module

# The weights of one layer and direction; b_* are None without bias, hr is
# LSTM's projection (proj_size, hidden) or None.
_Weights = namedtuple("_Weights", ["ih", "hh", "b_ih", "b_hh", "hr"])


def _rnn_tanh_cell(xp, state, w):
    """One step; xp = x @ w.ih.T + b_ih, precomputed for all steps."""
    return (_C.tanh(xp + F.linear(state[0], w.hh, w.b_hh)),)


def _rnn_relu_cell(xp, state, w):
    return (_C.relu(xp + F.linear(state[0], w.hh, w.b_hh)),)


def _lstm_cell(xp, state, w):
    h, c = state
    i, f, g, o = (xp + F.linear(h, w.hh, w.b_hh)).chunk(4, -1)
    c = _C.sigmoid(f) * c + _C.sigmoid(i) * _C.tanh(g)
    h = _C.sigmoid(o) * _C.tanh(c)
    return (h if w.hr is None else F.linear(h, w.hr)), c


def _gru_cell(xp, state, w):
    h = state[0]
    x_r, x_z, x_n = xp.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w.hh, w.b_hh).chunk(3, -1)
    r = _C.sigmoid(x_r + h_r)
    z = _C.sigmoid(x_z + h_z)
    n = _C.tanh(x_n + r * h_n)
    return (n + z * (h - n),)  # (1 - z) * n + z * h


# mode -> (cell, gates per hidden unit)
_MODES = {"RNN_TANH": (_rnn_tanh_cell, 1), "RNN_RELU": (_rnn_relu_cell, 1), "LSTM": (_lstm_cell, 4),
          "GRU": (_gru_cell, 3)}


def _run(cell, x, states, weights, num_layers, num_directions, dropout, training, lengths=None):
    """Run a stack of recurrent layers over x (T, N, I). states is a tuple
    of (layers * directions, N, *) tensors (h, or h and c), weights a list of
    _Weights indexed layer * directions + direction. Returns (output
    (T, N, directions * H), final states shaped like states). With lengths
    (N,), a sequence's steps from its length on keep its state and output
    zeros: a packed sequence's run (a reverse direction starts at each
    sequence's own last step)."""
    steps = x.shape[0]
    live = None if lengths is None else [_C.gt(lengths, t).unsqueeze(-1) for t in range(steps)]
    finals = []
    for layer in range(num_layers):
        outs = []
        for direction in range(num_directions):
            k = layer * num_directions + direction
            w = weights[k]
            xp = F.linear(x, w.ih, w.b_ih)  # the input projection of all steps in one GEMM
            state = tuple(s[k] for s in states)
            ys = [None] * steps
            for t in (reversed(range(steps)) if direction else range(steps)):
                new = cell(xp[t], state, w)
                if live is not None:
                    new = tuple(_C.where(live[t], n, o) for n, o in zip(new, state))
                    ys[t] = _C.where(live[t], new[0], _C.zeros_like(new[0]))
                else:
                    ys[t] = new[0]
                state = new
            outs.append(_C.stack(ys))
            finals.append(state)
        x = outs[0] if num_directions == 1 else _C.cat(outs, -1)
        if dropout > 0 and training and layer < num_layers - 1:
            x = F.dropout(x, dropout, True)
    return x, tuple(_C.stack([f[i] for f in finals]) for i in range(len(states)))


class RNNBase(Module):
    """A stack of num_layers recurrent layers (both directions when
    bidirectional); dropout applies between layers while training."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"[{name}] dropout should be a number in range [0, 1] representing the "
                             f"probability of an element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout option adds dropout after all but last recurrent layer, so "
                          f"non-zero dropout expects num_layers greater than 1, but got dropout={dropout} "
                          f"and num_layers={num_layers}")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError(f"[{name}] hidden_size ({hidden_size}) and num_layers ({num_layers}) "
                             "must be positive")
        if proj_size < 0 or (proj_size and proj_size >= hidden_size):
            raise ValueError(f"[{name}] proj_size ({proj_size}) must be 0 or in "
                             f"[1, hidden_size={hidden_size})")
        if proj_size and mode != "LSTM":
            raise ValueError(f"[{name}] proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _MODES[mode][1] * hidden_size
        out_size = proj_size or hidden_size
        directions = 2 if bidirectional else 1
        self._all_weights = []  # per layer and direction, the parameter names in PyTorch's order
        for layer in range(num_layers):
            for direction in range(directions):
                shapes = {"weight_ih": (gate_size, input_size if layer == 0 else out_size * directions),
                          "weight_hh": (gate_size, out_size)}
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(_C.empty(shape, device=device, dtype=dtype)))
                self._all_weights.append([kind + suffix for kind in shapes])
        self.reset_parameters()

    def reset_parameters(self):
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -stdv, stdv)

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _weights(self):
        out = []
        for names in self._all_weights:
            suffix = names[0][len("weight_ih"):]
            out.append(_Weights(*(self._parameters.get(kind + suffix)
                                  for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"))))
        return out

    def flatten_parameters(self):
        """A no-op kept for PyTorch code: cuDNN wants its weights in one
        block; musa's kernels take them as they are."""

    def forward(self, input, hx=None):
        """(output, h_n) -- (output, (h_n, c_n)) for LSTM. input is (L, N, I),
        (N, L, I) when batch_first, or unbatched (L, I); hx (or (h_0, c_0))
        is (layers * directions, N, H) or unbatched (layers * directions, H),
        zeros when None."""
        name = type(self).__name__
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.ndim not in (2, 3):
            raise ValueError(f"[{name}] Expected input to be 2-D or 3-D but received {input.ndim}-D tensor")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"[{name}] input.size(-1) must equal input_size. "
                               f"Expected {self.input_size}, got {input.shape[-1]}")
        batched = input.ndim == 3
        x = input.unsqueeze(1) if not batched else input.transpose(0, 1) if self.batch_first else input
        if x.shape[0] == 0:
            raise ValueError(f"[{name}] expected a sequence length larger than 0, got input of shape "
                             f"{tuple(input.shape)}")
        directions = 2 if self.bidirectional else 1
        n = x.shape[1]
        shapes = [(self.num_layers * directions, n, self.proj_size or self.hidden_size)]
        if self.mode == "LSTM":
            shapes.append((self.num_layers * directions, n, self.hidden_size))
        if hx is None:
            states = tuple(_C.zeros(s, dtype=x.dtype) for s in shapes)
        else:
            states = self._check_states(hx, shapes, batched)
        cell = _MODES[self.mode][0]
        out, finals = _run(cell, x, states, self._weights(), self.num_layers, directions, self.dropout,
                           self.training)
        if not batched:
            out, finals = out.squeeze(1), tuple(f.squeeze(1) for f in finals)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, (finals if self.mode == "LSTM" else finals[0])

    def _forward_packed(self, packed, hx):
        """A PackedSequence in, a PackedSequence out; hx and h_n in the
        batch's original order, as PyTorch has them."""
        padded, lengths = pad_packed_sequence(packed)
        if padded.shape[-1] != self.input_size:
            raise RuntimeError(f"[{type(self).__name__}] input.size(-1) must equal input_size. "
                               f"Expected {self.input_size}, got {padded.shape[-1]}")
        directions = 2 if self.bidirectional else 1
        n = padded.shape[1]
        shapes = [(self.num_layers * directions, n, self.proj_size or self.hidden_size)]
        if self.mode == "LSTM":
            shapes.append((self.num_layers * directions, n, self.hidden_size))
        states = (tuple(_C.zeros(sh, dtype=padded.dtype) for sh in shapes) if hx is None
                  else self._check_states(hx, shapes, True))
        out, finals = _run(_MODES[self.mode][0], padded, states, self._weights(), self.num_layers, directions,
                           self.dropout, self.training, lengths)
        return _pack_like(out, packed), (finals if self.mode == "LSTM" else finals[0])

    def _check_states(self, hx, shapes, batched):
        name = type(self).__name__
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"[{name}] hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            states = tuple(hx)
        else:
            states = (hx,)
        want = 3 if batched else 2
        if any(s.ndim != want for s in states):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            raise RuntimeError(f"[{name}] for {kind} input, hx should also be {want}-D but got "
                               f"{tuple(s.ndim for s in states)}-D tensors")
        if not batched:
            states = tuple(s.unsqueeze(1) for s in states)
        for s, shape in zip(states, shapes):
            if tuple(s.shape) != shape:
                raise RuntimeError(f"[{name}] Expected hidden size {shape}, got {list(s.shape)}")
        return states

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh), with
    nonlinearity 'tanh' or 'relu'."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"[RNN] Unknown nonlinearity '{nonlinearity}' (expected 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    """Long short-term memory; with proj_size > 0 the hidden state is
    projected to proj_size features by weight_hr."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, 0, device, dtype)


class RNNCellBase(Module):
    """One step of a recurrent layer: weight_ih (gates * H, I), weight_hh
    (gates * H, H), optional bias_ih and bias_hh."""

    def __init__(self, mode, input_size, hidden_size, bias, device, dtype):
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = _MODES[mode][1] * hidden_size
        self.weight_ih = Parameter(_C.empty((gate_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(_C.empty((gate_size, hidden_size), device=device, dtype=dtype))
        for name in ("bias_ih", "bias_hh"):
            b = Parameter(_C.empty(gate_size, device=device, dtype=dtype)) if bias else None
            self.register_parameter(name, b)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def _step(self, input, states):
        """The new states for input (I,) or (N, I) and states shaped like it
        (None: zeros)."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"[{name}] Expected input to be 1-D or 2-D but received {input.ndim}-D tensor")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"[{name}] input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        if states is None:
            zeros = _C.zeros((x.shape[0], self.hidden_size), dtype=x.dtype)
            states = (zeros,) * (2 if self.mode == "LSTM" else 1)
        else:
            want = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
            for s in states:
                if tuple(s.shape) != want:
                    raise RuntimeError(f"[{name}] Expected hidden size {want}, got {tuple(s.shape)}")
            states = states if batched else tuple(s.unsqueeze(0) for s in states)
        w = _Weights(self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, None)
        out = _MODES[self.mode][0](F.linear(x, w.ih, w.b_ih), states, w)
        return out if batched else tuple(s.squeeze(0) for s in out)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """One step of RNN: forward(input, hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"[RNNCell] Unknown nonlinearity '{nonlinearity}' (expected 'tanh' or 'relu')")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, None if hx is None else (hx,))[0]


class LSTMCell(RNNCellBase):
    """One step of LSTM: forward(input, (h, c)=None) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, None if hx is None else tuple(hx))


class GRUCell(RNNCellBase):
    """One step of GRU: forward(input, hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, None if hx is None else (hx,))[0]
