"""Error messages read "[name] message", as the C side's do.

"[matmul] shapes (2, 3) and (4, 5) cannot be multiplied": name is the
function, class or method the user called ("embedding", "LSTM",
"ModuleDict.update", "Tensor.__bool__"), and PyTorch's wording follows. The
first tests read the sources, so a new raise in another style fails here
before anyone sees it; the last ones check that helpers raising for several
callers name the caller.
"""
import ast
import pathlib
import re

import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "python" / "musa"
SKIPPED_DIRS = set()

# "[name] text" with {} standing for an f-string field: "[{}.extend] should ..."
FORM = re.compile(r"\[(?:[\w.]|\{\})+\]( |$)")

# Raises whose text Python's conventions or PyTorch compatibility fix, as
# (file under python/musa, enclosing function, exception). Each one must
# still exist, so the list cannot go stale.
ALLOWED = {
    # module-level __getattr__: Python's own "module 'musa' has no attribute 'x'"
    ("__init__.py", "__getattr__", "AttributeError"),
    ("nn/parallel/__init__.py", "__getattr__", "AttributeError"),
    ("autograd/__init__.py", "__getattr__", "AttributeError"),
    ("cuda/__init__.py", "__getattr__", "AttributeError"),
    # attribute lookup: "'Net' object has no attribute 'x'", as Python and PyTorch say
    ("nn/modules/module.py", "Module.__getattr__", "AttributeError"),
    ("utils/benchmark.py", "Measurement.__getattr__", "AttributeError"),
    # re-raises the C check's message, which carries its own [gradcheck] prefix
    ("autograd/__init__.py", "_check", "GradcheckError"),
    # a traced module forwards attribute lookups: Python's own AttributeError(name)
    ("jit/__init__.py", "TracedModule.__getattr__", "AttributeError"),
    # the jit's internal signals, caught inside it: a guard miss carries its
    # segment and outcome, and Unsupported a reason the "runs eagerly" warning quotes
    ("jit/_segments.py", "run_path", "Miss"),
    ("jit/_tracing.py", "needs_tape_node", "Unsupported"),
    ("jit/_training.py", "TrainingNode.__init__", "Unsupported"),
    # assert_close: its own messages carry [assert_close]; a caller's msg= is
    # raised as the caller wrote it, as PyTorch does
    ("testing/__init__.py", "_fail", "exc"),
}

# Protocol signals that carry no message.
SIGNALS = {"StopIteration", "StopAsyncIteration", "GeneratorExit"}
# Container protocols: KeyError(key) and IndexError(index) carry the key itself.
KEYED = {"KeyError", "IndexError"}


def _template(node):
    """The message's text with {} for f-string fields, or None when it is not
    a string literal (a variable, str(e), ...)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # "a" + "b"
        return _template(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _template(node.func.value)  # "...{}".format(...)
    return None


def _exc_name(exc):
    f = exc.func if isinstance(exc, ast.Call) else exc
    return f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", ast.unparse(f))


def _raises():
    """(file, enclosing qualified function, exception name, raise node) for
    every raise with an exception in the package."""
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if SKIPPED_DIRS & set(rel.parts[:-1]):
            continue

        def walk(node, scope):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    yield from walk(child, scope + [child.name])
                elif isinstance(child, ast.Raise) and child.exc is not None:
                    yield rel.as_posix(), ".".join(scope), _exc_name(child.exc), child
                else:
                    yield from walk(child, scope)

        yield from walk(ast.parse(path.read_text(), str(path)), [])


def test_python_raises_are_prefixed():
    bad, used = [], set()
    for rel, scope, name, node in _raises():
        key = (rel, scope, name)
        if key in ALLOWED:
            used.add(key)
            continue
        if name in SIGNALS:
            continue
        args = node.exc.args if isinstance(node.exc, ast.Call) else []
        text = _template(args[0]) if args else None
        if text is None and name in KEYED and args:
            continue  # the argument is the missing key or index itself
        if text is None or not FORM.match(text):
            bad.append(f"{rel}:{node.lineno} ({scope or '<module>'}): {ast.unparse(node.exc)[:100]}")
    assert not bad, "raises without a leading [name]:\n" + "\n".join(bad)
    assert used == ALLOWED, f"stale ALLOWED entries: {sorted(ALLOWED - used)}"


def test_the_walk_sees_the_package():
    # a broken walk (wrong root, parse error swallowed) would pass vacuously
    found = list(_raises())
    assert len(found) > 150
    assert {rel.split("/")[0] for rel, *_ in found} >= {"nn", "optim", "utils", "autograd"}


def test_extension_errors_are_prefixed():
    """PyErr_SetString / PyErr_Format in python/musa/_C: the first string
    literal of the message starts with "[" (pm_raise passes the C message,
    already "[op] ...", through a variable)."""
    bad, count = [], 0
    for path in sorted((PACKAGE / "_C").glob("*.c")):
        src = path.read_text()
        for m in re.finditer(r"PyErr_(?:SetString|Format)\s*\(\s*[\w.]+\s*,\s*", src):
            count += 1
            rest = src[m.end():]
            line = src.count("\n", 0, m.start()) + 1
            if rest.startswith('"'):
                if not FORM.match(rest[1:].replace("%s", "{}")):
                    bad.append(f"{path.name}:{line}: {rest.splitlines()[0]}")
            elif not rest.startswith(("msg)", "*msg ? msg :")):  # formatted earlier, or pm_raise
                bad.append(f"{path.name}:{line}: message is not a literal: {rest.splitlines()[0]}")
    assert count > 100
    assert not bad, "extension errors without a leading [name]:\n" + "\n".join(bad)


def _message(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value.args[0]  # str() of a KeyError would quote it


# Helpers that raise for many callers name the one the user called.
@pytest.mark.parametrize("fn, prefix", [
    (lambda: nn.init.kaiming_uniform_(musa.empty(4), mode="fan_x"), "[kaiming_uniform_] Mode fan_x"),
    (lambda: nn.init.xavier_normal_(musa.empty(4)), "[xavier_normal_] Fan in and fan out"),
    (lambda: nn.MultiheadAttention(4, 2)(musa.ones(3, 4), musa.ones(3, 4), musa.ones(3, 4),
                                         attn_mask=musa.ones(3, 3, dtype=musa.int64)),
     "[MultiheadAttention] mask must be bool or floating point"),
    (lambda: F.scaled_dot_product_attention(musa.ones(3, 4), musa.ones(3, 4), musa.ones(3, 4),
                                            attn_mask=musa.ones(3, 3, dtype=musa.int64)),
     "[scaled_dot_product_attention] mask must be bool or floating point"),
    (lambda: musa.ones(2).to("cuda:x"), "[Tensor.to] Invalid device string: 'cuda:x'"),
    (lambda: nn.Linear(2, 2).to("cuda:x"), "[Module.to] Invalid device string: 'cuda:x'"),
    (lambda: nn.Linear(2, 2).register_buffer("a.b", None),
     "[Module.register_buffer] buffer name can't contain"),
    (lambda: musa.autograd.grad(musa.ones(1), 3), "[grad] inputs must be a Tensor or a sequence of Tensors"),
    (lambda: nn.Sequential(nn.ReLU())[3], "[Sequential] index 3 is out of range for length 1"),
    # the extension: argument parsing, operators and custom backward nodes
    (lambda: musa.zeros(2, foo=1), "[zeros] got an unexpected keyword argument 'foo'"),
    (lambda: musa.sum(musa.ones(2), dim="x"), "[sum] dim must be an int or a sequence of ints, not str"),
    (lambda: musa.tensor([[1, 2], [3]]), "[tensor] expected sequence of length 2 at dim 1 (got 1)"),
    (lambda: bool(musa.ones(2)),
     "[Tensor.__bool__] Boolean value of Tensor with more than one value is ambiguous"),
    (lambda: musa.ones(2)[5], "[index] index 5 is out of bounds for dimension 0 with size 2"),
])
def test_errors_name_the_callers_function(fn, prefix):
    assert _message(fn).startswith(prefix)


def test_custom_backward_errors_name_the_node():
    class Twice(musa.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return 3  # not a tensor

    x = musa.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=r"^\[TwiceBackward\] backward returned int for input 0"):
        Twice.apply(x).sum().backward()
