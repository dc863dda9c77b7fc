"""musa.save and musa.load: tensors, state_dicts and nested containers of
them in a .musa file, without pickle; PyTorch's zip checkpoints load too.

    musa.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}, "ckpt.musa")
    ckpt = musa.load("ckpt.musa")
    model.load_state_dict(ckpt["model"])

A saved object is a .musa container (docs/format.md) of kind "object": the
tensors are the container's tensor list (tensors that share storage are
saved with it once and load as views of one storage again), and the header
member "object" is a JSON tree that stands for the object, with tensors as
{"$tensor": i} (docs/format.md lists every tag). Loading reads JSON and
tensor data only: no code in a file ever runs. Invariants:

- save writes a tree that load accepts and decodes to an equal object
  (same types; floats bit for bit, nan, inf and -0.0 included), or raises a
  TypeError naming the place inside the object, `obj['layers'][2]`, before
  it writes anything;
- load checks the whole tree (tags, types, tensor indices) and raises an
  OSError naming the file and the place in the tree; a file the container's
  reader accepts never crashes load;
- the same tensor object saved twice loads as one object; different tensor
  objects over one storage load as views of one storage.

PyTorch checkpoints (the zip files torch.save writes) go to musa._pytorch,
which loads their tensors and containers through an allow-list unpickler.
"""
import collections
import io
import json
import math
import os

from . import _C

__all__ = ["save", "load"]

_KIND = "object"
_VERSION = 1           # header member "object_version": the tree's format
_MAX_DEPTH = 64        # the container's JSON reader refuses deeper values; the tree's root is at 1
_MAX_OBJECT_KEYS = 1024  # larger str-keyed dicts are written as pairs (see _Encoder.mapping)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_MUSA_MAGIC = b"\x89MUSA\r\n\x1a"
_ZIP_MAGIC = b"PK\x03\x04"
_HEADER_KEYS = {"kind", "storages", "tensors", "object", "object_version"}


# ---------------------------------------------------------------------------
# saving
# ---------------------------------------------------------------------------

def save(obj, f):
    """Save obj to f: a path (str or os.PathLike; written atomically) or a
    binary file object with write(). obj is a tensor, or a tree of dict,
    OrderedDict, list, tuple, set, frozenset of tensors, str, bytes, int,
    float, bool, None and musa dtypes; Parameters stay Parameters, and every
    tensor keeps requires_grad. Anything else raises TypeError naming where
    it sits in obj. See docs/format.md for the file."""
    tensors, tree = _Encoder().encode(obj)
    sections = {"object": json.dumps(tree, ensure_ascii=False, allow_nan=False,
                                     separators=(",", ":")),
                "object_version": str(_VERSION)}
    if isinstance(f, (str, bytes, os.PathLike)):
        _write(f, tensors, sections)
    elif callable(getattr(f, "write", None)):
        if isinstance(f, io.TextIOBase):
            raise TypeError("[musa.save] f is a text file; open it in binary mode ('wb')")
        # The container's writer saves to paths (atomically, by rename): save
        # into a temporary folder, then copy the bytes.
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory(prefix="musa-save-") as tmp:
            path = os.path.join(tmp, "object.musa")
            _write(path, tensors, sections)
            with open(path, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 20)
    else:
        raise TypeError("[musa.save] f must be a path (str or os.PathLike) or a binary file "
                        f"object with write(), not {type(f).__name__}")


def _write(path, tensors, sections):
    try:
        _C._file_save(path, _KIND, tensors, sections)
    except (OSError, ValueError, TypeError) as e:  # the container's own checks and I/O
        msg = _strip(str(e))
        if msg.startswith("the header is"):
            msg += " (numbers, str and bytes live in the header: keep large data in tensors)"
        raise type(e)(f"[musa.save] {msg}") from None


def _strip(msg):
    """A C message without its leading "[function] "."""
    return msg.split("] ", 1)[1] if msg.startswith("[") and "] " in msg else msg


def _short(x, n=60):
    r = repr(x)
    return r if len(r) <= n else r[:n - 3] + "..."


class _Encoder:
    """obj -> (tensor list, JSON tree). The path to the value being encoded
    is kept as a list of parts ("obj", "['layers']", "[2]") for messages.
    depth is the JSON depth of the value (the tree's root is at 1)."""

    def __init__(self):
        self.tensors = []   # the file's tensor list
        self.by_id = {}     # id(tensor object) -> index (the objects live in obj)
        self.by_layout = {}  # (dtype, storage address, offset, shape, strides) -> [index]
        self.open = set()   # ids of the containers on the path (cycles)
        self.path = ["obj"]

    def encode(self, obj):
        return self.tensors, self.value(obj, 1)

    def fail(self, what):
        raise TypeError(f"[musa.save] {''.join(self.path)} {what}")

    def deep(self, depth):
        if depth > _MAX_DEPTH:
            self.fail(f"nests too deeply: the file's JSON tree holds at most {_MAX_DEPTH} levels "
                      "(tuples take 2, dicts with keys other than str 3)")

    def at(self, part, x, depth):
        self.path.append(part)
        v = self.value(x, depth)
        self.path.pop()
        return v

    def value(self, x, depth):
        self.deep(depth)
        t = type(x)
        if x is None or t is bool:
            return x
        if isinstance(x, str):
            return self.string(x)
        if isinstance(x, int):
            x = int.__int__(x)  # subclasses (IntEnum) save as int
            if _INT64[0] <= x <= _INT64[1]:
                return x
            self.deep(depth + 1)
            return {"$int": hex(x)}
        if isinstance(x, float):
            x = float.__float__(x)
            if math.isfinite(x):
                return x
            self.deep(depth + 1)
            return {"$float": "nan" if x != x else "inf" if x > 0 else "-inf"}
        if isinstance(x, _C.Tensor):
            return self.tensor(x, depth)
        if t is _C.dtype:
            self.deep(depth + 1)
            return {"$dtype": str(x).split(".")[1]}
        if t is bytes:
            import base64
            self.deep(depth + 1)
            return {"$bytes": base64.b64encode(x).decode("ascii")}
        if t in (list, tuple, set, frozenset, dict, collections.OrderedDict):
            if id(x) in self.open:
                self.fail("contains itself (a reference cycle); musa.save writes trees")
            self.open.add(id(x))
            if t is list:
                v = [self.at(f"[{i}]", e, depth + 1) for i, e in enumerate(x)]
            elif t is tuple:
                self.deep(depth + 1)
                v = {"$tuple": [self.at(f"[{i}]", e, depth + 2) for i, e in enumerate(x)]}
            elif t in (set, frozenset):
                self.deep(depth + 1)
                try:  # sorted when the elements allow: the same set gives the same file
                    items = sorted(x)
                except TypeError:
                    items = list(x)
                v = {"$" + t.__name__: [self.at(f"<element {i}>", e, depth + 2)
                                        for i, e in enumerate(items)]}
            else:
                v = self.mapping(x, depth)
            self.open.discard(id(x))
            return v
        self.fail(self.refusal(x))

    @staticmethod
    def refusal(x):
        t = type(x)
        name = t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
        hint = ""
        if t.__module__ == "numpy":
            hint = (": a NumPy array; convert it with musa.from_numpy(a)" if name == "numpy.ndarray"
                    else ": a NumPy scalar; save x.item()")
        elif isinstance(x, dict):
            hint = ": a dict subclass; save dict(x)"
        elif isinstance(x, (list, tuple)):
            hint = ": a list or tuple subclass; save list(x) or tuple(x)"
        elif t is bytearray:
            hint = "; save bytes(x)"
        elif callable(x) or hasattr(x, "state_dict"):
            hint = " (musa.save keeps data, not code: save a module's or optimizer's state_dict())"
        return (f"is a {name}{hint}; musa.save keeps tensors, str, bytes, int, float, bool, None "
                "and dict, OrderedDict, list, tuple, set of them (no pickle)")

    def string(self, s):
        if not s.isascii():
            try:
                s.encode("utf-8")
            except UnicodeEncodeError:
                self.fail(f"is a str with a lone surrogate ({_short(s)}), which is not UTF-8")
        return s

    def tensor(self, x, depth):
        self.deep(depth + 1)
        cls = type(x)
        if cls is _C.Tensor:
            tag, default = "$tensor", False
        else:
            from .nn.parameter import Parameter
            if cls is not Parameter:
                self.fail(f"is a {cls.__qualname__} (a Tensor subclass); save a Tensor or a "
                          "Parameter")
            tag, default = "$parameter", True
        node = {tag: self.index(x)}
        if x.requires_grad != default:
            node["requires_grad"] = x.requires_grad
        return node

    def index(self, x):
        """x's index in the file's tensor list. Tensors of one dtype, storage
        and layout are one entry, as the container's writer makes them (it
        refuses a list that holds one twice)."""
        i = self.by_id.get(id(x))
        if i is not None:
            return i
        off = x.storage_offset()
        shape = tuple(x.shape)
        key = (x.dtype, x.data_ptr() - off * x.element_size(), off, shape,
               tuple(s if n > 1 else 0 for s, n in zip(x.stride(), shape)))
        same = self.by_layout.setdefault(key, [])
        for j in same:
            if self.tensors[j]._shares_storage(x):
                self.by_id[id(x)] = j
                return j
        i = len(self.tensors)
        self.tensors.append(x)
        same.append(i)
        self.by_id[id(x)] = i
        return i

    def mapping(self, x, depth):
        """A dict or OrderedDict: a JSON object when its keys allow (plain
        dicts: str keys not starting with "$"), else under a tag, as an
        object of literal keys or as [key, value] pairs. Objects with more
        than _MAX_OBJECT_KEYS members are written as pairs: the container's
        reader checks member names for duplicates pairwise."""
        tag = "$odict" if type(x) is collections.OrderedDict else "$dict"
        str_keys = len(x) <= _MAX_OBJECT_KEYS and all(
            type(k) is str and "\0" not in k for k in x)
        if str_keys and tag == "$dict" and not any(k.startswith("$") for k in x):
            return {self.string(k): self.at(f"[{_short(k)}]", v, depth + 1) for k, v in x.items()}
        self.deep(depth + 1)
        if str_keys:
            return {tag: {self.string(k): self.at(f"[{_short(k)}]", v, depth + 2)
                          for k, v in x.items()}}
        self.deep(depth + 2)
        pairs = []
        for n, (k, v) in enumerate(x.items()):
            pairs.append([self.at(f"<key {n}>", k, depth + 3),
                          self.at(f"[{_short(k)}]", v, depth + 3)])
        return {tag: pairs}


# ---------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------

def load(f, map_location=None, *, mmap=False, weights_only=True):
    """Load what musa.save saved in f (a path or a binary file object with
    read()), or the tensors and containers of a PyTorch checkpoint (the zip
    file torch.save writes).

    map_location, as in torch.load: None, 'cpu', a musa.device, a dict
    mapping saved locations ('cuda:0') to others, or a callable
    fn(storage, location) returning a tensor to use (a 1-D tensor over the
    whole storage) or None. Tensors load on the CPU; a location on another
    device raises unless mapped to the CPU. mmap=True maps the file (a path)
    instead of reading it: tensors are copy-on-write pages of the file.
    weights_only is accepted for PyTorch compatibility: musa.load never runs
    code from a file, and refuses anything in a PyTorch pickle but tensors,
    Parameters, dtypes and containers of them (pickle.UnpicklingError).

    A damaged or invalid .musa file raises OSError naming the file and the
    place; see docs/format.md."""
    if not isinstance(mmap, bool):
        raise TypeError(f"[musa.load] mmap must be a bool, not {type(mmap).__name__}")
    if not isinstance(weights_only, bool):
        raise TypeError(f"[musa.load] weights_only must be a bool, not {type(weights_only).__name__}")
    locate = _Locator(map_location)
    if isinstance(f, (str, bytes, os.PathLike)):
        name = os.fsdecode(f)
        try:
            with open(f, "rb") as fh:
                head = fh.read(16)
        except (OSError, ValueError) as e:  # ValueError: a NUL in the path
            raise type(e)(f"[musa.load] cannot open {name!r}: "
                          f"{getattr(e, 'strerror', None) or e}") from None
        path, data = f, None
    elif callable(getattr(f, "read", None)):
        if mmap:
            raise ValueError("[musa.load] mmap=True needs a path: a file object has no file to map")
        name = getattr(f, "name", None)
        name = name if isinstance(name, str) else "<file object>"
        data = f.read()
        if isinstance(data, str):
            raise TypeError(f"[musa.load] {name} is a text file; open it in binary mode ('rb')")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"[musa.load] {name}: read() returned {type(data).__name__}, not bytes")
        data = bytes(data)
        path, head = None, data[:16]
    else:
        raise TypeError("[musa.load] f must be a path (str or os.PathLike) or a binary file object "
                        f"with read(), not {type(f).__name__}")
    if head.startswith(_ZIP_MAGIC):
        from . import _pytorch
        return _pytorch.load_zip(path if path is not None else io.BytesIO(data), name, locate, mmap)
    if head[:1] == b"\x80" and not head.startswith(_MUSA_MAGIC):
        raise OSError(f"[musa.load] {name}: a pickle, not a .musa file or a zip checkpoint: "
                      "PyTorch's legacy format (torch < 1.6, or _use_new_zipfile_serialization="
                      "False) is not read; re-save it with a newer torch.save (the zip format)")
    try:
        if path is not None:
            kind, header, tensors = _C._file_load(path, mmap=mmap)
        else:
            kind, header, tensors = _C._file_load_bytes(data)
    except (OSError, ValueError) as e:
        msg = _strip(str(e))
        if msg.startswith("<memory>"):
            msg = name + msg[len("<memory>"):]
        raise type(e)(f"[musa.load] {msg}") from None
    return _Decoder(name, kind, header, list(tensors), locate).run()


class _Locator:
    """map_location, checked once; __call__ gives the storage to use for
    one saved on `location`. Tensors live on the CPU, so every storage must
    end up there."""

    def __init__(self, map_location):
        m = map_location
        if m is None or isinstance(m, _C.device):
            pass
        elif isinstance(m, str):
            m = self.device(m, "map_location")
        elif isinstance(m, dict):
            for k, v in m.items():
                if not isinstance(k, str) or not isinstance(v, (str, _C.device)):
                    raise TypeError("[musa.load] a map_location dict maps location strings to "
                                    f"devices (str or musa.device), not {type(k).__name__} to "
                                    f"{type(v).__name__}")
        elif not callable(m):
            raise TypeError("[musa.load] map_location must be None, a str, a musa.device, a dict or "
                            f"a callable, not {type(m).__name__}")
        self.map = m
        self.calls = callable(m) and not isinstance(m, (dict, _C.device))

    @staticmethod
    def device(d, what):
        try:
            return _C.device(d)
        except (RuntimeError, TypeError, ValueError) as e:
            raise type(e)(f"[musa.load] {what}: {_strip(str(e))}") from None

    def __call__(self, storage, location, name, what):
        """storage: a 1-D tensor over a whole saved storage; location: where
        it was saved ('cpu', 'cuda:0'); what names it in messages."""
        m = self.map
        if self.calls:
            r = m(storage, location)
            if r is storage:
                return storage
            if r is not None:
                if not isinstance(r, _C.Tensor):
                    raise TypeError(f"[musa.load] {name}: map_location returned "
                                    f"{type(r).__name__} for {what}, not a Tensor or None")
                if r.dtype != storage.dtype or r.numel() != storage.numel():
                    raise ValueError(f"[musa.load] {name}: map_location returned a {r.dtype} "
                                     f"tensor of {r.numel()} elements for {what}, a {storage.dtype} "
                                     f"storage of {storage.numel()}")
                r = r.detach().reshape(-1)
                if r.storage_offset() or not r.is_contiguous():
                    r = r.clone()
                return r
            target = location
        elif isinstance(m, dict):
            target = m.get(location, location)
        else:
            target = location if m is None else m
        if isinstance(target, str):
            try:
                target = _C.device(target)
            except (RuntimeError, TypeError, ValueError):
                raise RuntimeError(f"[musa.load] {name}: {what} was saved on '{target}', which "
                                   "musa does not have; pass map_location='cpu'") from None
        if target.type != "cpu":
            raise RuntimeError(f"[musa.load] {name}: {what} would load on {target}, and this build "
                               "of musa has no CUDA; pass map_location='cpu' to load it on the CPU")
        return storage


_TENSOR_DEFAULTS = {"$tensor": False, "$parameter": True}  # requires_grad when not written
_TAGS = {"$tuple", "$set", "$frozenset", "$dict", "$odict", "$int", "$float", "$bytes", "$dtype",
         "$tensor", "$parameter"}
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool",
           "int16")  # a dtype's code is its place here: new ones go last


class _Decoder:
    """The header of a kind "object" file -> the object. Every check names
    the file and the place in the header ("object['$tuple'][2]")."""

    def __init__(self, name, kind, header_text, tensors, locate):
        self.name, self.kind, self.text = name, kind, header_text
        self.tensors = tensors
        self.locate = locate
        self.made = {}  # (index, tag, requires_grad) -> the tensor object made for it
        self.param = None

    def bad(self, where, what):
        raise OSError(f"[musa.load] {self.name}: {where}: {what}")

    def run(self):
        if self.kind != _KIND:
            hint = "; load a saved model with musa.jit.load" if self.kind == "model" else ""
            raise OSError(f"[musa.load] {self.name}: a .musa file of kind '{self.kind}', not an "
                          f"object saved by musa.save{hint}")
        try:
            header = json.loads(self.text)
        except (ValueError, RecursionError) as e:  # the C reader took it: cannot happen
            raise OSError(f"[musa.load] {self.name}: the header is not JSON: {e}") from None
        extra = set(header) - _HEADER_KEYS
        if extra:
            self.bad("header", f"unknown member '{sorted(extra)[0]}'")
        version = header.get("object_version")
        if type(version) is not int:
            self.bad("header", "'object_version' is missing or not an integer")
        if version != _VERSION:
            self.bad("header", f"object_version {version}; this musa reads version {_VERSION}"
                     + (" (the file is from a newer musa)" if version > _VERSION else ""))
        if "object" not in header:
            self.bad("header", "no 'object' member")
        self.map_storages(header)
        return self.value(header["object"], "object")

    def map_storages(self, header):
        """Run map_location over every storage (the container's reader
        checked the storage and tensor tables, bool bytes included; saved
        tensors are on the CPU)."""
        if not self.tensors:
            return
        calls = self.locate.calls
        if not calls:
            self.locate(None, "cpu", self.name, "the file's tensors")
            return
        by_storage = {}
        for i, t in enumerate(header["tensors"]):
            by_storage.setdefault(t["storage"], []).append(i)
        for s, users in sorted(by_storage.items()):
            st = header["storages"][s]
            first = self.tensors[users[0]]
            flat = _C.as_strided(first, (st["numel"],), (1,), 0)
            r = self.locate(flat, "cpu", self.name, f"storage {s}")
            if r is flat:
                continue
            for i in users:
                t = self.tensors[i]
                self.tensors[i] = _C.as_strided(r, tuple(t.shape), t.stride(), t.storage_offset())

    def value(self, v, where):
        t = type(v)
        if v is None or t in (bool, int, float, str):
            return v
        if t is list:
            return [self.value(e, f"{where}[{i}]") for i, e in enumerate(v)]
        if t is not dict:  # cannot happen: json.loads makes nothing else
            self.bad(where, f"unexpected {t.__name__}")
        tags = [k for k in v if k.startswith("$")]
        if not tags:
            return {k: self.value(e, f"{where}[{_short(k)}]") for k, e in v.items()}
        tag = tags[0]
        if len(tags) > 1:
            self.bad(where, f"an object with two tags, '{tags[0]}' and '{tags[1]}'")
        if tag not in _TAGS:
            self.bad(where, f"unknown tag {_short(tag)}")
        extra = [k for k in v if k != tag and not (tag in _TENSOR_DEFAULTS and k == "requires_grad")]
        if extra:
            self.bad(where, f"'{tag}' takes no member {_short(extra[0])}")
        arg, at = v[tag], f"{where}[{tag!r}]"
        if tag in _TENSOR_DEFAULTS:
            return self.tensor(tag, arg, v.get("requires_grad", _TENSOR_DEFAULTS[tag]), at, where)
        if tag in ("$tuple", "$set", "$frozenset"):
            if type(arg) is not list:
                self.bad(at, f"'{tag}' takes an array, not {_json_type(arg)}")
            items = [self.value(e, f"{at}[{i}]") for i, e in enumerate(arg)]
            if tag == "$tuple":
                return tuple(items)
            for i, e in enumerate(items):
                self.hashable(e, f"{at}[{i}]")
            return set(items) if tag == "$set" else frozenset(items)
        if tag in ("$dict", "$odict"):
            return self.mapping(tag, arg, at)
        if type(arg) is not str:
            self.bad(at, f"'{tag}' takes a string, not {_json_type(arg)}")
        if tag == "$int":
            neg = arg.startswith("-")
            digits = arg[1:] if neg else arg
            if not (digits.startswith("0x") and len(digits) > 2
                    and all(c in "0123456789abcdef" for c in digits[2:])):
                self.bad(at, f"{_short(arg)} is not a hexadecimal integer (-0x1f)")
            return int(arg, 16)
        if tag == "$float":
            if arg not in ("nan", "inf", "-inf"):
                self.bad(at, f"{_short(arg)} is not nan, inf or -inf")
            return float(arg)
        if tag == "$bytes":
            import binascii
            try:
                return binascii.a2b_base64(arg, strict_mode=True)
            except (binascii.Error, ValueError) as e:
                self.bad(at, f"invalid base64: {e}")
        if arg not in _DTYPES:  # $dtype
            self.bad(at, f"unknown dtype {_short(arg)}")
        return getattr(_C, arg)

    def mapping(self, tag, arg, at):
        out = {} if tag == "$dict" else collections.OrderedDict()
        if type(arg) is dict:  # literal str keys
            for k, e in arg.items():
                out[k] = self.value(e, f"{at}[{_short(k)}]")
            return out
        if type(arg) is not list:
            self.bad(at, f"'{tag}' takes an object or an array of [key, value] pairs, not "
                     f"{_json_type(arg)}")
        for i, p in enumerate(arg):
            if type(p) is not list or len(p) != 2:
                self.bad(f"{at}[{i}]", "a member must be a [key, value] pair")
            k = self.value(p[0], f"{at}[{i}][0]")
            self.hashable(k, f"{at}[{i}][0]")
            if k in out:
                self.bad(f"{at}[{i}][0]", f"duplicate key {_short(k)}")
            out[k] = self.value(p[1], f"{at}[{i}][1]")
        return out

    def hashable(self, x, where):
        try:
            hash(x)
        except TypeError:
            self.bad(where, f"a {type(x).__name__} cannot be a set element or a dict key")

    def tensor(self, tag, i, requires_grad, at, where):
        if type(i) is not int or not 0 <= i < len(self.tensors):
            self.bad(at, f"tensor index {_short(i)} is not in [0, {len(self.tensors)})")
        if type(requires_grad) is not bool:
            self.bad(where, "'requires_grad' must be true or false")
        key = (i, tag, requires_grad)
        t = self.made.get(key)
        if t is not None:
            return t
        t = self.tensors[i]
        if requires_grad and not (t.is_floating_point()):
            self.bad(where, f"requires_grad on a {t.dtype} tensor (only floating tensors "
                     "require gradients)")
        if tag == "$parameter":
            if self.param is None:
                from .nn.parameter import Parameter
                self.param = Parameter
            t = self.param(t, requires_grad)
        elif requires_grad:
            t = t.detach().requires_grad_(True)
        self.made[key] = t
        return t


def _json_type(v):
    return {type(None): "null", bool: "a boolean", int: "a number", float: "a number",
            str: "a string", list: "an array", dict: "an object"}.get(type(v), type(v).__name__)
