"""musa.utils.benchmark: Timer, Measurement and Compare (the statistics and
tables are checked on given raw times, against PyTorch's; the timing itself
only for shape, never for speed)."""
import random

import pytest

import musa
from musa.utils.benchmark import Compare, Measurement, Timer


def spec(**kw):
    base = {"stmt": "x + y", "setup": "pass", "global_setup": "", "label": None,
            "sub_label": None, "description": None, "env": None, "num_threads": 1}
    base.update(kw)
    return base


def test_measurement_statistics():
    m = Measurement(10, [1.0, 2.0, 3.0, 4.0, 100.0], spec())
    assert m.times == [0.1, 0.2, 0.3, 0.4, 10.0]
    assert m.median == 0.3 and m.mean == pytest.approx(2.2)
    assert m.iqr == pytest.approx(0.2)  # quartiles 0.2 and 0.4
    assert not m.meets_confidence(0.1) and m.meets_confidence(1.0)
    assert m.stmt == "x + y" and m.num_threads == 1 and m.title == "x + y"
    text = repr(m)
    assert "Median: 300.00 ms" in text and "5 measurements, 10 runs per measurement" in text
    one = Measurement(1000, [0.002], spec(label="add", setup="z = 1"))
    assert one.iqr == 0 and "2.00 us" in repr(one) and "setup: z = 1" in repr(one)
    assert one.title == "add"
    with pytest.raises(AttributeError):
        one.nothing


def test_timer_runs_the_statement():
    x, y = musa.ones(8), musa.ones(8)
    calls = []
    t = Timer("calls.append(1); x + y", globals={"x": x, "y": y, "calls": calls}, num_threads=1)
    m = t.timeit(7)
    assert m.number_per_run == 7 and len(m.raw_times) == 1 and len(calls) == 7 + 1  # +warm-up
    seen = []
    m = t.blocked_autorange(callback=lambda n, s: seen.append(n), min_run_time=0.01)
    assert sum(m.raw_times) >= 0.01 and all(n == m.number_per_run for n in seen)
    m = t.adaptive_autorange(threshold=10.0, min_run_time=0.001)
    assert len(m.raw_times) >= 3
    before = musa.get_num_threads()
    probe = Timer("seen.append(musa.get_num_threads())", globals={"musa": musa, "seen": seen},
                  num_threads=1)
    seen.clear()
    probe.timeit(1)
    assert set(seen) == {1} and musa.get_num_threads() == before
    g = Timer("v", global_setup="v = 3")
    assert g.timeit(1).number_per_run == 1


@pytest.mark.parametrize("kw, err, match", [
    (dict(stmt=lambda: 0), TypeError, "stmt must be a str"),
    (dict(num_threads=0), ValueError, "num_threads"),
    (dict(language="c++"), ValueError, "language"),
])
def test_timer_errors(kw, err, match):
    with pytest.raises(err, match=match):
        Timer(**kw)


def test_unsupported_forms():
    t = Timer()
    with pytest.raises(ValueError, match="number"):
        t.timeit(0)
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        t.repeat()
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        t.autorange()


def _measurements(lib, seed, envs):
    """Random measurements (1 to 7 blocks, medians from 1 ns to 3 s, some
    noisy), as musa's or as PyTorch's."""
    rng = random.Random(seed)
    out = []
    for threads in (1, 4):
        for env in envs:
            for sub in ("a", "bb"):
                for desc in ("x", "yy", "zzzz"):
                    if rng.random() < 0.2:
                        continue
                    k = rng.choice([1e-8, 1e-6, 1e-3, 1])
                    raw = [rng.uniform(1, 3) * k * rng.choice([1, 1, 1.5])
                           for _ in range(rng.choice([1, 3, 7]))]
                    if lib == "musa":
                        out.append(Measurement(10, raw, spec(stmt="f(x)", label="lbl",
                                                             sub_label=sub, description=desc,
                                                             env=env, num_threads=threads)))
                    else:
                        from torch.utils.benchmark.utils.common import TaskSpec
                        import torch.utils.benchmark as tb
                        out.append(tb.Measurement(10, raw, TaskSpec("f(x)", "pass", "", "lbl", sub,
                                                                    desc, env, threads)))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_compare_prints_pytorchs_tables(seed):
    tb = pytest.importorskip("torch.utils.benchmark")
    envs = (None,) if seed % 2 else ("e1", "env2")
    for mods in ([], ["trim"], ["warn"], ["trim", "warn"], ["color"], ["rowcolor", "warn"]):
        got = []
        for lib, cls in (("musa", Compare), ("torch", tb.Compare)):
            c = cls(_measurements(lib, seed, envs))
            for mod in mods:
                {"trim": c.trim_significant_figures, "warn": c.highlight_warnings,
                 "color": c.colorize, "rowcolor": lambda: c.colorize(rowwise=True)}[mod]()
            got.append(str(c))
        assert got[0] == got[1], mods
    ms, ts = _measurements("musa", seed, envs), _measurements("torch", seed, envs)
    for m, t in zip(ms, ts):
        assert (m.significant_figures, m.has_warnings) == (t.significant_figures,
                                                          t.has_warnings)


def test_compare_of_timers_and_errors(capsys):
    x = musa.ones(8)
    ms = [Timer(stmt, globals={"x": x}, label="ops", sub_label=f"n={n}", description=name,
                num_threads=1).blocked_autorange(min_run_time=0.01)
          for n in (8,) for stmt, name in (("x + x", "add"), ("x * x", "mul"))]
    ms.append(Timer("x + x", globals={"x": x}, label="other").blocked_autorange(
        min_run_time=0.01))
    c = Compare(ms[:1])
    c.extend_results(ms[1:])
    c.print()
    out = capsys.readouterr().out
    assert out.count("Times are in") == 2 and "[" in out and " ops " in out and " other " in out
    head = [line for line in out.splitlines() if "add" in line][0]
    assert "|" in head and "mul" in head
    assert "1 threads: -" in out and "  n=8" in out
    with pytest.raises(ValueError, match=r"\[Compare\] expected Measurements"):
        Compare([1.0])
