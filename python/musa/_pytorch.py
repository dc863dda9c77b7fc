"""PyTorch checkpoints for musa.load: the zip files torch.save writes, read
without torch and without running their pickles' code.

A checkpoint is a zip archive holding NAME/data.pkl, a pickle of the saved
object, and NAME/data/KEY, the bytes of each storage (little-endian). In
the pickle a tensor is torch._utils._rebuild_tensor_v2(storage, offset,
size, stride, requires_grad, hooks), and a storage is the persistent id
('storage', torch.FloatStorage, KEY, location, numel). Here each storage
becomes one flat musa tensor read from its record, and each tensor an
as_strided view of it, so tensors that shared a storage share one again.

What a pickle may do is allowed by list, as in torch's weights_only
unpickler (torch/_weights_only_unpickler.py), at two gates:

1. Before anything is unpickled, every opcode is read with
   pickletools.genops (a parser; it executes nothing). Only the opcodes
   that build data, look up globals, call them, and load persistent ids
   pass; a memo index must not exceed the opcode's byte position (a
   LONG_BINPUT of 2^30 would make the unpickler allocate a memo that big);
   GLOBAL names must be on the list.
2. pickle.Unpickler resolves every global through find_class, which
   returns musa's own functions for torch's rebuild functions, storage
   classes, dtypes, torch.Size, Parameter and collections.OrderedDict,
   and refuses any other name. The functions check every argument.
   Globals come back as immutable objects without a __dict__ (_Fn,
   _StorageType) or dtypes, never as classes or plain functions, so BUILD
   (which sets attributes) cannot change a class or function of this
   process; it can only set attributes of the objects being built.
   persistent_load accepts storage ids only.

The result is then walked: it may hold only dict, OrderedDict, list, tuple,
set, frozenset, str, bytes, int, float, bool, None, tensors and dtypes.
Every refusal and every damaged archive raises pickle.UnpicklingError
naming the file.
"""
import collections
import io
import mmap as _mmap
import os
import pickle
import pickletools
import re
import struct
import zipfile
import zlib

import numpy as np

from . import _C

_MAX_PICKLE = 1 << 30  # bytes of data.pkl (a zip may claim any size; it is read into memory)

# torch's storage classes: the musa dtype of their elements
_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
    "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool", "ShortStorage": "int16",
}
_NO_DTYPE = {  # storage classes and dtypes musa has no dtype for
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128", "ComplexHalfStorage": "complex32",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32",
    "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
    "complex32": "complex32", "complex64": "complex64",
    "complex128": "complex128",
}
_MUSA_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
                "uint8", "bool")
_NUMPY = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int64": "<i8", "int32": "<i4",
          "int16": "<i2", "int8": "i1", "uint8": "u1"}
_SIZES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
          "int16": 2, "int8": 1, "uint8": 1, "bool": 1}

# Opcodes that build data, look up and call globals, and load persistent
# ids (protocols 2 to 5, as torch.save writes with any pickle_protocol).
# Left out: the text forms of protocol 0 (INT, STRING, GET, PUT, PERSID,
# ...), INST and OBJ, the extension registry (EXT1/2/4), NEWOBJ and
# NEWOBJ_EX (which instantiate classes; torch.save never writes them for
# tensors), and out-of-band buffers.
_OPCODES = frozenset("""
    PROTO FRAME STOP MARK POP POP_MARK DUP
    NONE NEWTRUE NEWFALSE BININT BININT1 BININT2 LONG1 LONG4 BINFLOAT
    BINUNICODE SHORT_BINUNICODE BINUNICODE8 SHORT_BINSTRING BINSTRING
    SHORT_BINBYTES BINBYTES BINBYTES8
    EMPTY_TUPLE TUPLE TUPLE1 TUPLE2 TUPLE3 EMPTY_LIST APPEND APPENDS LIST
    EMPTY_DICT DICT SETITEM SETITEMS EMPTY_SET ADDITEMS FROZENSET
    GLOBAL STACK_GLOBAL REDUCE BUILD BINPERSID
    BINGET LONG_BINGET BINPUT LONG_BINPUT MEMOIZE
""".split())

_KEY = re.compile(r"[0-9A-Za-z_.\-]{1,64}\Z")


class _Refused(pickle.UnpicklingError):
    """A refusal or a damaged archive, already worded for the user."""


class _Fn(tuple):
    """An allowed global that can be called: (function,). Immutable and
    without a __dict__, so BUILD cannot change it or what it calls."""
    __slots__ = ()

    def __call__(self, *args):
        return self[0](*args)


class _StorageType(tuple):
    """A torch storage class, as find_class gives it: (dtype name,).
    Immutable and without a __dict__, so BUILD cannot change it."""
    __slots__ = ()


class _StorageRef(tuple):
    """A loaded storage, as persistent_load gives it: (key,)."""
    __slots__ = ()


def load_zip(src, name, locate, use_mmap):
    """The object of the torch.save zip archive src (a path, or a BytesIO
    of the file's bytes); locate applies map_location
    (serialization._Locator)."""
    try:
        zf = zipfile.ZipFile(src)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as e:
        raise _Refused(f"[musa.load] {name}: a damaged zip file: {e}") from None
    bytes_of = None
    try:
        bytes_of = _Bytes(src, use_mmap)
        return _Archive(zf, bytes_of, name, locate).load()
    except _Refused:
        raise
    except (zipfile.BadZipFile, EOFError, struct.error) as e:
        raise _Refused(f"[musa.load] {name}: a damaged zip file: {e}") from None
    finally:
        zf.close()
        if bytes_of is not None:
            bytes_of.close()


class _Bytes:
    """Byte ranges of the archive's file, for records stored uncompressed
    (as torch.save writes them): read straight into their array, or mapped
    copy-on-write (use_mmap, a path only)."""

    def __init__(self, src, use_mmap):
        self.fh = self.mem = self.mm = None
        if isinstance(src, io.BytesIO):
            self.mem = src.getbuffer()
            self.size = len(self.mem)
        else:
            self.fh = open(src, "rb", buffering=0)
            self.size = os.fstat(self.fh.fileno()).st_size
            if use_mmap and self.size:
                self.mm = _mmap.mmap(self.fh.fileno(), 0, access=_mmap.ACCESS_COPY)

    def close(self):
        if self.fh is not None:
            self.fh.close()
        if self.mem is not None:
            self.mem.release()

    def read(self, at, n):
        if self.mem is not None:
            return bytes(self.mem[at:at + n])
        return os.pread(self.fh.fileno(), n, at)

    def array(self, at, n):
        """Bytes [at, at + n) as a writable uint8 array (short: None)."""
        if at + n > self.size:
            return None
        if self.mm is not None:
            arr = np.frombuffer(self.mm, np.uint8, n, at)
            return arr if arr.flags.writeable else arr.copy()
        buf = np.empty(n, np.uint8)
        if self.mem is not None:
            buf[:] = np.frombuffer(self.mem, np.uint8, n, at)
            return buf
        view, done = memoryview(buf), 0
        while done < n:
            k = os.preadv(self.fh.fileno(), [view[done:]], at + done)
            if k <= 0:
                return None
            done += k
        return buf


class _Archive:
    """One checkpoint: its records, and the storages loaded from them."""

    def __init__(self, zf, bytes_of, name, locate):
        self.zf, self.bytes, self.name, self.locate = zf, bytes_of, name, locate
        self.storages = {}  # key -> (dtype name, numel, flat tensor)
        self.passthrough = None  # an exception that crosses the unpickler unchanged
        names = zf.namelist()
        roots = [n[:-len("/data.pkl")] for n in names
                 if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(roots) != 1:
            self.refuse("not a torch.save checkpoint: the zip holds "
                        + ("no" if not roots else "more than one") + " NAME/data.pkl")
        self.root = roots[0]
        if f"{self.root}/constants.pkl" in names or any(
                n.startswith(f"{self.root}/code/") for n in names):
            self.refuse("a TorchScript archive (torch.jit.save); save the model's state_dict() "
                        "with torch.save and load that")
        order = f"{self.root}/byteorder"
        if order in names and zf.read(order).strip() != b"little":
            self.refuse("the checkpoint was written on a big-endian machine; musa reads "
                        "little-endian data only")

    def refuse(self, what):
        raise _Refused(f"[musa.load] {self.name}: {what}")

    def load(self):
        info = self.zf.getinfo(f"{self.root}/data.pkl")
        if info.file_size > _MAX_PICKLE:
            self.refuse(f"data.pkl is {info.file_size} bytes; musa reads at most {_MAX_PICKLE}")
        data = self.zf.read(info)
        self.scan(data)
        try:
            obj = _Unpickler(io.BytesIO(data), self).load()
        except (_Refused, MemoryError):
            raise
        except Exception as e:  # a malformed pickle: the unpickler's own errors
            if e is self.passthrough:
                raise
            self.refuse(f"data.pkl is not a valid pickle ({type(e).__name__}: {e})")
        self.check_result(obj)
        return obj

    def scan(self, data):
        """Gate 1: every opcode on the list, memo indices bounded, GLOBAL
        names allowed."""
        try:
            for op, arg, pos in pickletools.genops(data):
                if op.name not in _OPCODES:
                    self.refuse(f"data.pkl uses the pickle opcode {op.name}, which loads no tensor "
                                "data (refused, as by torch's weights_only=True)")
                if op.name in ("BINPUT", "LONG_BINPUT") and arg > pos:
                    self.refuse(f"data.pkl stores memo entry {arg} at byte {pos}")
                if op.name == "GLOBAL":
                    module, _, attr = arg.partition(" ")
                    _Unpickler.allowed(self, module, attr)
                if op.name == "STOP":
                    break
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            self.refuse(f"data.pkl is not a valid pickle ({e})")

    def storage(self, key, dtype, numel, location):
        """The storage KEY as a flat tensor (read once; later ids must agree)."""
        have = self.storages.get(key)
        if have is not None:
            if have[:2] != (dtype, numel):
                self.refuse(f"storage '{key}' is used as {have[1]} {have[0]} elements and as "
                            f"{numel} {dtype} elements")
            return _StorageRef((key,))
        record = f"{self.root}/data/{key}"
        try:
            info = self.zf.getinfo(record)
        except KeyError:
            self.refuse(f"storage '{key}' has no record {record}")
        nbytes = numel * _SIZES[dtype]
        if info.file_size != nbytes:
            self.refuse(f"record {record} holds {info.file_size} bytes; {numel} {dtype} elements "
                        f"take {nbytes}")
        t = _tensor(self.raw(info, nbytes), dtype)
        try:
            t = self.locate(t, location, self.name, f"storage '{key}'")
        except Exception as e:  # map_location's own error (or a callable's): unchanged
            self.passthrough = e
            raise
        self.storages[key] = (dtype, numel, t)
        return _StorageRef((key,))

    def raw(self, info, nbytes):
        """A record's bytes as a writable uint8 array. Records stored
        uncompressed (torch.save's) are read straight from the file into
        their array and their CRC checked, or mapped copy-on-write without
        a check (mmap=True); others go through zipfile."""
        if info.compress_type == zipfile.ZIP_STORED:
            head = self.bytes.read(info.header_offset, 30)
            if len(head) != 30 or head[:4] != b"PK\x03\x04":
                self.refuse(f"record {info.filename}: a damaged local header")
            n, m = struct.unpack("<HH", head[26:30])
            arr = self.bytes.array(info.header_offset + 30 + n + m, nbytes)
            if arr is None:
                self.refuse(f"record {info.filename} runs past the end of the file")
            if self.bytes.mm is None and zlib.crc32(arr) != info.CRC:
                self.refuse(f"record {info.filename}: CRC mismatch (the file is damaged)")
            return arr
        buf = np.empty(nbytes, np.uint8)
        view = memoryview(buf)
        pos = 0
        with self.zf.open(info) as r:
            while pos < nbytes:
                chunk = r.read(min(nbytes - pos, 1 << 24))
                if not chunk:
                    self.refuse(f"record {info.filename} ends after {pos} of {nbytes} bytes")
                view[pos:pos + len(chunk)] = chunk
                pos += len(chunk)
        return buf

    def check_result(self, obj):
        """Only data may come out: containers, scalars, tensors, dtypes."""
        stack, seen = [obj], set()
        while stack:
            x = stack.pop()
            t = type(x)
            if x is None or t in (bool, int, float, str, bytes, _C.dtype) or isinstance(x, _C.Tensor):
                continue
            if t not in (dict, collections.OrderedDict, list, tuple, set, frozenset):
                what = ("a storage without a tensor" if t is _StorageRef
                        else "a storage class" if t is _StorageType
                        else f"the global {getattr(x[0], '__name__', '?')} itself" if t is _Fn
                        else f"{_short(x)} ({t.__name__})")
                self.refuse(f"the checkpoint holds {what}, not data; musa.load loads tensors, "
                            "Parameters and containers of them")
            if id(x) in seen:
                continue
            seen.add(id(x))
            if t in (dict, collections.OrderedDict):
                stack.extend(x.keys())
                stack.extend(x.values())
            else:
                stack.extend(x)


def _short(x, n=60):
    r = repr(x)
    return r if len(r) <= n else r[:n - 3] + "..."


def _tensor(buf, dtype):
    """A flat musa tensor of `dtype` over the little-endian bytes buf (a
    uint8 array: shared where the dtype allows, else converted)."""
    if dtype == "bool":  # any nonzero byte is True; musa keeps 0 and 1
        return _C.from_numpy(buf != 0)
    if dtype == "bfloat16":  # NumPy has no bfloat16: widen the bits to float32 (exact)
        wide = (buf.view("<u2").astype("<u4") << 16).view("<f4")
        return _C.cast(_C.from_numpy(wide), _C.bfloat16)
    arr = buf.view(_NUMPY[dtype])
    if arr.ctypes.data % arr.itemsize:  # an unaligned mapped record: copy
        arr = arr.copy()
    return _C.from_numpy(arr)


class _Unpickler(pickle.Unpickler):
    """Gate 2: globals through find_class, storages through persistent_load."""

    def __init__(self, file, archive):
        super().__init__(file)
        self.archive = archive

    @staticmethod
    def allowed(archive, module, name):  # (a staticmethod: the scan asks it too)
        """What GLOBAL module.name stands for, or a refusal."""
        full = f"{module}.{name}"
        if module == "collections" and name == "OrderedDict":
            return _Fn((collections.OrderedDict,))
        if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):
            return "_" + name  # protocol 2 pickles sets as set([...])
        if module == "_codecs" and name == "encode":
            return "_encode"  # and bytes as _codecs.encode(str, 'latin1')
        if module == "torch._utils" and name in _REBUILD:
            return name  # the method of that name
        if module == "torch.nn.parameter" and name == "Parameter":
            return "_parameter"
        if module == "torch":
            if name in _STORAGES:
                return _StorageType((_STORAGES[name],))
            if name in _MUSA_DTYPES:
                return getattr(_C, name)
            if name == "Size":
                return "_size"
            if name in _NO_DTYPE:
                archive.refuse(f"refuses global '{full}': musa has no {_NO_DTYPE[name]} dtype")
        hint = ""
        if module.startswith("torch.nn.modules") or module == "__main__":
            hint = ("; a whole pickled module cannot load: save its state_dict() with torch.save "
                    "and load that")
        archive.refuse(f"refuses global '{full}': only tensors, Parameters, dtypes and containers "
                       f"of them load (as with torch's weights_only=True){hint}")

    def find_class(self, module, name):
        if not isinstance(module, str) or not isinstance(name, str):
            self.archive.refuse("refuses a global whose name is not a str")
        what = self.allowed(self.archive, module, name)
        return _Fn((getattr(self, what),)) if isinstance(what, str) else what

    def persistent_load(self, pid):
        a = self.archive
        if type(pid) is not tuple or len(pid) != 5 or type(pid[0]) not in (str, bytes) \
                or pid[0] not in ("storage", b"storage"):
            a.refuse(f"refuses persistent id {_short(pid)}: only storages load")
        _, stype, key, location, numel = pid
        if isinstance(key, bytes) and key.isascii():
            key = key.decode("ascii")
        if isinstance(location, bytes) and location.isascii():
            location = location.decode("ascii")
        if type(stype) is not _StorageType:
            a.refuse(f"refuses persistent id {_short(pid)}: {_short(stype)} is not a storage class")
        if type(key) is not str or not _KEY.match(key) or type(location) is not str \
                or type(numel) is not int or numel < 0:
            a.refuse(f"refuses persistent id {_short(pid)}: expected ('storage', class, key, "
                     "location, numel)")
        return a.storage(key, stype[0], numel, location)

    # torch._utils' rebuild functions and torch.Size, as musa reads them

    def _set(self, items=()):
        if type(items) not in (list, tuple):
            self.archive.refuse(f"set of {_short(items)}: expected a list")
        return set(items)

    def _frozenset(self, items=()):
        return frozenset(self._set(items))

    def _encode(self, text, encoding):
        if type(text) is not str or encoding != "latin1":
            self.archive.refuse(f"_codecs.encode of {_short(text)}, {_short(encoding)}: only "
                                "bytes pickled as (str, 'latin1') load")
        return text.encode("latin1")

    def _size(self, sizes=()):
        if type(sizes) not in (tuple, list) or not all(type(n) is int for n in sizes):
            self.archive.refuse(f"torch.Size of {_short(sizes)}: expected ints")
        return tuple(sizes)

    def _rebuild_tensor(self, storage, storage_offset, size, stride):
        a = self.archive
        if type(storage) is not _StorageRef:
            a.refuse(f"_rebuild_tensor: {_short(storage)} is not a storage")
        dtype, numel, flat = a.storages[storage[0]]
        if type(size) is not tuple or type(stride) is not tuple or len(size) != len(stride) \
                or len(size) > 8 or not all(type(n) is int and n >= 0 for n in size + stride) \
                or type(storage_offset) is not int or storage_offset < 0:
            a.refuse(f"_rebuild_tensor: size {_short(size)}, stride {_short(stride)} and offset "
                     f"{_short(storage_offset)} do not describe a tensor")
        if all(size):
            last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= numel:
                a.refuse(f"_rebuild_tensor: a tensor of size {size}, stride {stride} at offset "
                         f"{storage_offset} reaches element {last} of storage '{storage[0]}', "
                         f"which has {numel}")
        return _C.as_strided(flat, size, stride, storage_offset)

    def _rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad,
                           backward_hooks, metadata=None):
        t = self._rebuild_tensor(storage, storage_offset, size, stride)
        self.no_hooks(backward_hooks, "_rebuild_tensor_v2")
        if metadata is not None and (type(metadata) is not dict or metadata):
            self.archive.refuse("_rebuild_tensor_v2: tensor metadata (conjugate or negative bits) "
                                "is not supported")
        return self.requiring_grad(t, requires_grad, "_rebuild_tensor_v2")

    def _rebuild_parameter(self, data, requires_grad, backward_hooks):
        if type(data) is not _C.Tensor:
            self.archive.refuse(f"_rebuild_parameter: {_short(data)} is not a tensor")
        self.no_hooks(backward_hooks, "_rebuild_parameter")
        self.check_grad(data, requires_grad, "_rebuild_parameter")
        from .nn.parameter import Parameter
        return Parameter(data, requires_grad)

    def _parameter(self, data, requires_grad=True):
        return self._rebuild_parameter(data, requires_grad, {})

    def _rebuild_parameter_with_state(self, data, requires_grad, backward_hooks, state):
        # the state (the Parameter's own attributes) is not restored
        return self._rebuild_parameter(data, requires_grad, backward_hooks)

    def no_hooks(self, hooks, who):
        if type(hooks) not in (dict, collections.OrderedDict) or hooks:
            self.archive.refuse(f"{who}: backward hooks must be an empty OrderedDict (hooks are "
                                "not loaded)")

    def check_grad(self, t, requires_grad, who):
        if type(requires_grad) is not bool:
            self.archive.refuse(f"{who}: requires_grad {_short(requires_grad)} is not a bool")
        if requires_grad and not t.is_floating_point():
            self.archive.refuse(f"{who}: requires_grad on a {t.dtype} tensor")

    def requiring_grad(self, t, requires_grad, who):
        self.check_grad(t, requires_grad, who)
        return t.requires_grad_(True) if requires_grad else t


_REBUILD = ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_parameter",
            "_rebuild_parameter_with_state")
