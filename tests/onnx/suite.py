"""The ONNX backend node tests (onnx.backend.test, python3-onnx 1.12's 924
node cases) run against musa's importer (the C one, src/io/onnx.c, through
musa.onnx.backend); prints the pass count per op and a total over the cases
whose ops the importer reads.

    PYTHONPATH=python /usr/bin/python3 tests/onnx/suite.py [-v] [--min 0.95]

A case passes when every output matches the case's expected values within
its rtol/atol (ONNX's runner's rule: numpy.testing.assert_allclose) and its
dtype and shape. Cases using an op musa does not import are listed apart.
Exits 1 when the pass rate over imported-op cases is under --min.
"""
import argparse
import collections
import os
import sys
import warnings

import numpy as np

# python3-onnx 1.12's case generators use NumPy aliases that NumPy 1.24 removed
with warnings.catch_warnings():  # (asking NumPy about them warns)
    warnings.simplefilter("ignore")
    for _name, _type in (("float", float), ("int", int), ("bool", bool), ("object", object)):
        if not hasattr(np, _name):
            setattr(np, _name, _type)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import musa  # noqa: E402
from musa.onnx import backend  # noqa: E402
from musa import _C  # noqa: E402

MUSA_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int64, np.int32,
                                     np.int8, np.uint8, np.bool_)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-v", action="store_true", help="print each failure")
    ap.add_argument("--min", type=float, default=0.0)
    ap.add_argument("-k", default="", help="only cases whose name contains this")
    a = ap.parse_args()
    supported = frozenset(_C._onnx_ops())
    from onnx.backend.test.case import node
    warnings.filterwarnings("ignore")
    cases = [c for c in node.collect_testcases(None) if a.k in c.name]
    per_op = collections.defaultdict(lambda: [0, 0])
    missing = collections.Counter()
    no_dtype = collections.Counter()
    for c in cases:
        ops = [n.op_type for n in c.model.graph.node]
        op = ops[-1] if len(ops) == 1 else f"{ops[-1]} ({c.name.split('_expanded')[0][5:]} expanded)" \
            if "_expanded" in c.name else ops[-1]
        absent = sorted(set(o for o in ops if o not in supported))
        if absent:
            missing[", ".join(absent)] += 1
            continue
        kinds = {np.asarray(t).dtype for d in c.data_sets for t in list(d[0]) + list(d[1])}
        lacking = sorted(str(k) for k in kinds if k not in MUSA_DTYPES)
        if lacking:  # uint16/32/64, int16, strings: no musa op takes them
            no_dtype[", ".join(lacking)] += 1
            continue
        per_op[op][1] += 1
        try:
            rep = backend.prepare(c.model)
            for inputs, outputs in c.data_sets:
                got = rep.run(inputs)
                if len(got) != len(outputs):
                    raise AssertionError(f"{len(got)} outputs, expected {len(outputs)}")
                for g, w in zip(got, outputs):
                    w = np.asarray(w)
                    g = np.asarray(g)
                    if g.dtype != w.dtype or g.shape != w.shape:
                        raise AssertionError(f"got {g.dtype}{g.shape}, expected {w.dtype}{w.shape}")
                    np.testing.assert_allclose(g, w, rtol=c.rtol, atol=c.atol)
            per_op[op][0] += 1
        except Exception as e:  # a failure of this case, reported, never a crash of the run
            if a.v:
                print(f"FAIL {c.name}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    passed = sum(p for p, _ in per_op.values())
    total = sum(t for _, t in per_op.values())
    print(f"{'op':<44} passed / cases")
    for op in sorted(per_op):
        p, t = per_op[op]
        print(f"{op:<44} {p:3d} / {t:3d}{'' if p == t else '   <-'}")
    n_missing = sum(missing.values())
    print(f"\nnot imported ({n_missing} cases): " +
          "; ".join(f"{k} ({v})" for k, v in sorted(missing.items())))
    n_dtype = sum(no_dtype.values())
    print(f"\ndtypes musa does not have ({n_dtype} cases): " +
          "; ".join(f"{k} ({v})" for k, v in sorted(no_dtype.items())))
    rate = passed / total if total else 0.0
    print(f"\n{passed} of {total} cases of imported ops passed ({100 * rate:.1f} %); "
          f"{n_missing} of {len(cases)} cases use ops musa does not import, {n_dtype} dtypes "
          f"musa does not have")
    return 0 if rate >= a.min else 1


if __name__ == "__main__":
    sys.exit(main())
