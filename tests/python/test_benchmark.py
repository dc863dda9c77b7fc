"""musa.utils.benchmark: Timer and Measurement (the statistics are checked
on given raw times; the timing itself only for shape, never for speed)."""
import pytest

import musa
from musa.utils.benchmark import Measurement, Timer


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
