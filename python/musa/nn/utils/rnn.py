"""Variable-length sequences, as torch.nn.utils.rnn: PackedSequence and the
functions that make and undo it. musa's RNN, LSTM and GRU take a
PackedSequence: they run the padded batch with each sequence's steps past
its length masked (its state kept, its output zero), which gives the
packed run's results."""
from collections import namedtuple

from ... import _C
from ..._functions import _tensors

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence",
           "unpad_sequence", "unpack_sequence", "invert_permutation"]


class PackedSequence(namedtuple("PackedSequence", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """Sequences of a batch sorted by decreasing length and stored time step
    by time step: data (sum of lengths, *), batch_sizes (steps,) the number
    of sequences still running at each step; sorted_indices the batch order
    of the sort (None when the input was sorted), unsorted_indices its
    inverse."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes, self.sorted_indices,
                                                         self.unsorted_indices)

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def cpu(self):
        return self

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def invert_permutation(permutation):
    """The inverse of a permutation of 0..n-1 (a 1-D integer tensor), or
    None for None."""
    if permutation is None:
        return None
    inv = _C.zeros_like(permutation)
    return inv.scatter(0, permutation, _C.arange(permutation.numel(), dtype=permutation.dtype))


_invert = invert_permutation


def _lengths(lengths, who):
    if isinstance(lengths, _C.Tensor):
        if lengths.ndim != 1:
            raise ValueError(f"[{who}] lengths must be 1-D, got shape {tuple(lengths.shape)}")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch (T, B, *) (or (B, T, *) with batch_first) of
    sequences with the given lengths."""
    who = "pack_padded_sequence"
    _tensors(who, input=input)
    lens = _lengths(lengths, who)
    x = input.transpose(0, 1) if batch_first else input
    if x.ndim < 2 or len(lens) != x.shape[1]:
        raise ValueError(f"[{who}] expected {x.shape[1] if x.ndim > 1 else '?'} lengths for an input of shape "
                         f"{tuple(input.shape)}, got {len(lens)}")
    if any(n <= 0 for n in lens):
        raise RuntimeError(f"[{who}] Length of all samples has to be greater than 0, but found an element in "
                           f"'lengths' that is <= 0")
    if max(lens) > x.shape[0]:
        raise RuntimeError(f"[{who}] a length ({max(lens)}) is longer than the padded input ({x.shape[0]} steps)")
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError(f"[{who}] `lengths` array must be sorted in decreasing order when "
                               f"`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                               f"pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
                               f"you do not need ONNX exportability.")
        order, sorted_indices = list(range(len(lens))), None
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])  # stable, as torch's sort
        sorted_indices = _C.tensor(order, dtype=_C.int64)
        x = x.index_select(1, sorted_indices)
    lens_sorted = [lens[i] for i in order]
    batch_sizes = [sum(1 for n in lens_sorted if n > t) for t in range(lens_sorted[0])]
    data = _C.cat([x[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return PackedSequence(data, _C.tensor(batch_sizes, dtype=_C.int64), sorted_indices)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """(padded (T, B, *) or (B, T, *), lengths) from a PackedSequence, in the
    batch's original order."""
    who = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"[{who}] expected a PackedSequence, got {type(sequence).__name__}")
    sizes = [int(b) for b in sequence.batch_sizes.tolist()]
    steps, batch = len(sizes), sizes[0] if sizes else 0
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"[{who}] Expected total_length to be at least the length of the longest "
                             f"sequence in the input, but got total_length={total_length} and max sequence "
                             f"length being {steps}")
        steps = total_length
    data = sequence.data
    rows, start = [], 0
    feature = tuple(data.shape[1:])
    for t in range(steps):
        b = sizes[t] if t < len(sizes) else 0
        piece = data[start:start + b]
        start += b
        if b < batch:
            piece = _C.cat([piece, _C.full((batch - b,) + feature, padding_value, dtype=data.dtype)], 0)
        rows.append(piece)
    padded = _C.stack(rows, 0) if rows else _C.zeros((0, batch) + feature, dtype=data.dtype)
    lengths = _C.tensor([sum(1 for b in sizes if b > i) for i in range(batch)], dtype=_C.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices)
        lengths = lengths.index_select(0, sequence.unsorted_indices)
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0):
    """Stack sequences (L_i, *) into (max L, B, *) (or (B, max L, *)), padded."""
    who = "pad_sequence"
    if isinstance(sequences, _C.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError(f"[{who}] received an empty list of sequences")
    for i, s in enumerate(sequences):
        _tensors(who, **{f"sequences[{i}]": s})
    longest = max(s.shape[0] for s in sequences)
    rows = []
    for s in sequences:
        if s.shape[0] < longest:
            pad = _C.full((longest - s.shape[0],) + tuple(s.shape[1:]), padding_value, dtype=s.dtype)
            s = _C.cat([s, pad], 0)
        rows.append(s)
    return _C.stack(rows, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of sequences (L_i, *)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The sequences of a padded batch, cut to their lengths."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(_lengths(lengths, "unpad_sequence"))]


def unpack_sequence(packed_sequences):
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def _pack_like(padded, packed):
    """A padded (T, B, *) result in the batch's original order, packed with
    the time steps and order of packed."""
    x = padded if packed.sorted_indices is None else padded.index_select(1, packed.sorted_indices)
    sizes = [int(b) for b in packed.batch_sizes.tolist()]
    data = _C.cat([x[t, :b] for t, b in enumerate(sizes)], 0)
    return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
