"""musa.storage: Tensor.untyped_storage / storage / is_set_to, the storage
classes and Tensor.set_ on a storage, against torch 1.13 where it has the
same thing (its Tensor.storage() and TypedStorage.untyped())."""
import copy
import pickle

import pytest

import musa

torch = pytest.importorskip("torch")


def both(fn):
    """fn(lib) for musa and torch"""
    return fn(musa), fn(torch)


def test_every_view_sees_the_whole_storage():
    def views(lib):
        t = lib.arange(12.).reshape(3, 4)
        out = []
        for v in (t, t[1], t.T, t[:, 1:3], t[2, 3], t.reshape(-1)[5:]):
            s = v.storage()
            out.append((s.size(), s.element_size(), s.data_ptr() == t.data_ptr(), s.tolist(),
                        v.storage_offset()))
        return out
    m, t = both(views)
    assert m == t
    t = musa.arange(12.).reshape(3, 4)
    u = t[1:].untyped_storage()
    assert u.nbytes() == len(u) == u.size() == 48 and u.element_size() == 1
    assert u.data_ptr() == t.data_ptr() and u.device == musa.device("cpu")
    tt = torch.arange(12.).reshape(3, 4)
    assert u.tolist() == tt.storage().untyped().tolist()
    other = musa.arange(12.)
    assert other.untyped_storage().data_ptr() != u.data_ptr()


def test_writes_through_a_storage_reach_the_tensor_and_back():
    t = musa.zeros(2, 3)
    s = t.T.storage()
    s[4] = 7.5
    assert t.tolist() == [[0, 0, 0], [0, 7.5, 0]]
    t[0, 1] = 2
    assert s[1] == 2.0 and isinstance(s[1], float)
    s.fill_(1)
    assert t.tolist() == [[1.0] * 3] * 2
    u = t.untyped_storage()
    u[2], u[3] = 0, 0x40  # float32 1.0 is 00 00 80 3f (little-endian), 2.0 00 00 00 40
    assert t[0, 0].item() == 2.0
    i = musa.tensor([1, 2, 3], dtype=musa.int64).storage()
    assert i.tolist() == [1, 2, 3] and isinstance(i[0], int) and i.dtype == musa.int64


def test_set_to_a_storage_matches_torch():
    def run(lib):
        t = lib.arange(10.)
        out = []
        x = lib.empty(0)
        x.set_(t.storage())
        out.append((tuple(x.shape), x.tolist(), x.is_set_to(t)))
        y = lib.empty(0)
        y.set_(t.storage(), 2, (2, 3), (1, 2))
        out.append((tuple(y.shape), y.stride(), y.storage_offset(), y.tolist()))
        y.mul_(-1)
        out.append(t.tolist())
        return out
    m, t = both(run)
    assert m == t
    x = musa.empty(0)
    x.set_(musa.arange(4.).untyped_storage(), 1, (2,))  # an untyped storage, read as float32
    assert x.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match=r"\[Tensor.set_\] the storage holds musa.int64, the "
                                           r"tensor is musa.float32"):
        musa.empty(0).set_(musa.arange(3).storage())
    with pytest.raises(RuntimeError, match="6 bytes do not hold a whole number of musa.float32"):
        musa.empty(0).set_(musa.UntypedStorage(6))
    with pytest.raises(RuntimeError, match="view"):
        musa.empty(0).set_(musa.arange(4.).storage(), 2, (3,))  # past the end


def test_is_set_to():
    t = musa.arange(6.)
    assert t.is_set_to(t) and not t.is_set_to(t.clone())
    assert t[1:].is_set_to(t[1:]) and not t[1:].is_set_to(t[2:])
    assert not t.view(2, 3).is_set_to(t) and not t.is_set_to(t.view(musa.int32))
    tt = torch.arange(6.)
    assert (tt[1:].is_set_to(tt[1:]), tt.view(2, 3).is_set_to(tt)) == (True, False)


def test_storage_constructors_and_repr_match_torch():
    for args in [(), (3,), ([1, 2, 255],), ([],)]:
        m, t = musa.UntypedStorage(*args), torch.UntypedStorage(*args)
        assert m.nbytes() == t.nbytes()
        if args and args[0] != 3:
            assert m.tolist() == t.tolist()
            assert repr(m) == repr(t).replace("torch", "musa")
    assert musa.UntypedStorage(3).tolist() == [0, 0, 0]  # (torch leaves them uninitialised)
    ts = musa.TypedStorage([1.5, 2.5], dtype=musa.float64)
    tt = torch.TypedStorage([1.5, 2.5], dtype=torch.float64)
    assert (ts.size(), ts.nbytes(), ts.tolist()) == (tt.size(), tt.nbytes(), tt.tolist())
    assert repr(ts) == repr(tt).replace("torch", "musa")
    assert musa.TypedStorage(4).size() == 4 and musa.TypedStorage(4).dtype == musa.float32
    assert musa.is_storage(ts) and musa.is_storage(ts.untyped()) and not musa.is_storage(1)
    with pytest.raises(ValueError, match=r"\[UntypedStorage\] a sequence of byte values"):
        musa.UntypedStorage([256])
    with pytest.raises(ValueError, match="size must be non-negative"):
        musa.UntypedStorage(-1)
    with pytest.raises(TypeError, match=r"\[UntypedStorage\] takes no arguments"):
        musa.UntypedStorage(1, 2)
    with pytest.raises(RuntimeError, match="live on the CPU"):
        musa.UntypedStorage(2, device="cuda")
    with pytest.raises(TypeError, match="dtype must be a musa dtype"):
        musa.TypedStorage(2, dtype="float32")


def test_copy_clone_slice_pickle():
    t = musa.arange(4.)
    s = t.storage()
    c = s.clone()
    c[0] = 9
    assert t[0].item() == 0 and c[0] == 9.0
    s.copy_(c)
    assert t.tolist() == [9.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="sizes differ"):
        s.untyped().copy_(musa.UntypedStorage(3))
    with pytest.raises(TypeError, match="src must be a storage"):
        s.untyped().copy_(t)
    part = s[1:3]
    assert part.tolist() == [1.0, 2.0] and part.data_ptr() == t.data_ptr() + 4
    part[0] = -1
    assert t[1].item() == -1
    assert s.untyped()[4:8].tolist() == musa.tensor([-1.0]).untyped_storage().tolist()
    for clone in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s), copy.copy(s.untyped())):
        assert clone.data_ptr() != t.data_ptr()
        assert clone.tolist() == s.tolist() or clone.tolist() == s.untyped().tolist()
    i64 = musa.tensor([1, 2], dtype=musa.int64).storage()
    f32 = musa.zeros(2).storage()
    f32.copy_(i64)  # another dtype: element by element
    assert f32.tolist() == [1.0, 2.0]


def test_what_musa_refuses():
    s = musa.arange(4.).untyped_storage()
    assert s.resize_(16) is s  # the size it has
    with pytest.raises(NotImplementedError, match=r"\[UntypedStorage.resize_\] musa cannot "
                                                  r"resize a storage in place"):
        s.resize_(0)
    with pytest.raises(NotImplementedError, match="use Tensor.share_memory_"):
        s.share_memory_()
    with pytest.raises(RuntimeError, match="no pinned memory"):
        s.pin_memory()
    assert not s.is_pinned() and not s.is_cuda
    t = musa.arange(4.).share_memory_()
    assert t.untyped_storage().is_shared() and t.storage().is_shared()
    with pytest.raises(ValueError, match=r"\[untyped_storage\] a meta tensor has no storage"):
        musa._C._storage_bytes(musa._C._empty_meta(musa.float32, (2,)))
