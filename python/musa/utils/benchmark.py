"""musa.utils.benchmark: PyTorch's torch.utils.benchmark Timer and
Measurement, on Python's timeit.

    t = Timer("x @ y", globals={"x": a, "y": b}, num_threads=2)
    m = t.blocked_autorange(min_run_time=0.5)
    print(m.median, m.iqr)   # seconds per run

Timer runs stmt (after setup) with musa's thread count set to num_threads
for the measurement (and put back after). A Measurement holds the raw
times of its blocks, each of number_per_run runs: times are per run,
median, mean and iqr over them.
"""
import math
import statistics
import timeit as _timeit

__all__ = ["Timer", "Measurement"]


def _fmt(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale or unit == "ns":
            return f"{seconds / scale:.2f} {unit}"


class Measurement:
    """The result of a Timer: raw_times[i] is the time of block i, which ran
    the statement number_per_run times."""

    def __init__(self, number_per_run, raw_times, task_spec):
        self.number_per_run = number_per_run
        self.raw_times = list(raw_times)
        self.task_spec = task_spec

    @property
    def times(self):
        """Seconds per run, one per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self):
        return statistics.median(self.times)

    @property
    def mean(self):
        return statistics.fmean(self.times)

    @property
    def iqr(self):
        """The interquartile range of the per-run times (0 for fewer than 2)."""
        t = sorted(self.times)
        if len(t) < 2:
            return 0.0
        q = statistics.quantiles(t, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def significant_figures(self):
        """Digits of the median the spread supports (at most 4)."""
        if len(self.times) < 2 or self.iqr == 0 or self.median == 0:
            return 4
        return max(1, min(4, int(-math.floor(math.log10(self.iqr / self.median)))))

    def meets_confidence(self, threshold=0.1):
        return self.iqr / self.median < threshold if self.median else True

    @property
    def has_warnings(self):
        return len(self.times) >= 4 and not self.meets_confidence()

    @property
    def title(self):
        return self.task_spec["label"] or self.task_spec["stmt"]

    def __getattr__(self, name):  # label, sub_label, description, stmt, setup, num_threads
        spec = self.__dict__.get("task_spec")
        if spec is not None and name in spec:
            return spec[name]
        raise AttributeError(f"'Measurement' object has no attribute {name!r}")

    def __repr__(self):
        s = self.task_spec
        lines = [f"<musa.utils.benchmark.Measurement object at {hex(id(self))}>", self.title]
        if s["setup"] != "pass":
            lines.append(f"setup: {s['setup']}")
        n = len(self.times)
        if n > 1:
            q = sorted(self.times)
            lo, hi = (statistics.quantiles(q, n=4, method="inclusive")[i] for i in (0, 2))
            lines += [f"  Median: {_fmt(self.median)}",
                      f"  IQR:    {_fmt(self.iqr)} ({_fmt(lo)} to {_fmt(hi)})"]
        else:
            lines.append(f"  {_fmt(self.median)}")
        threads = s["num_threads"]
        lines.append(f"  {n} measurement{'s' if n != 1 else ''}, {self.number_per_run} runs "
                     f"{'per measurement' if n != 1 else ''}, {threads} "
                     f"thread{'s' if threads != 1 else ''}")
        if self.has_warnings:
            lines.append(f"  WARNING: Interquartile range is {100 * self.iqr / self.median:.1f}% "
                         f"of the median measurement.")
        return "\n".join(lines)


class Timer:
    """Times stmt, a Python statement (a string), after setup, with the
    names of globals in scope, on num_threads musa threads."""

    def __init__(self, stmt="pass", setup="pass", global_setup="", timer=_timeit.default_timer,
                 globals=None, label=None, sub_label=None, description=None, env=None,
                 num_threads=1, language="python"):
        if language not in ("python", "py"):
            raise ValueError(f"[Timer] language {language!r}: musa times Python statements")
        for name, v in (("stmt", stmt), ("setup", setup), ("global_setup", global_setup)):
            if not isinstance(v, str):
                raise TypeError(f"[Timer] {name} must be a str, got {type(v).__name__}")
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"[Timer] num_threads must be a positive int, got {num_threads!r}")
        self._globals = dict(globals or {})
        if global_setup:
            exec(global_setup, self._globals)
        self._timer = _timeit.Timer(stmt=stmt, setup=setup, timer=timer, globals=self._globals)
        self._spec = {"stmt": stmt, "setup": setup, "global_setup": global_setup,
                      "label": label, "sub_label": sub_label, "description": description,
                      "env": env, "num_threads": num_threads}

    def _run(self, number):
        from .. import get_num_threads, set_num_threads
        before = get_num_threads()
        set_num_threads(self._spec["num_threads"])
        try:
            return self._timer.timeit(number)
        finally:
            set_num_threads(before)

    def timeit(self, number=1000000):
        """One block of number runs."""
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"[Timer.timeit] number must be a positive int, got {number!r}")
        self._run(max(number // 100, 1))  # warm up
        return Measurement(number, [self._run(number)], self._spec)

    def _block_size(self, min_run_time):
        """Runs per block: a power of ten whose block takes at least a
        thousandth of min_run_time (so the timer's overhead is negligible)."""
        number = 1
        while True:
            t = self._run(number)
            if t >= min_run_time / 1000 or number >= 10 ** 9:
                return number
            number *= 10

    def blocked_autorange(self, callback=None, min_run_time=0.2):
        """Blocks of a fixed size until min_run_time seconds have run."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while total < min_run_time or not times:
            t = self._run(number)
            times.append(t)
            total += t
            if callback is not None:
                callback(number, t)
        return Measurement(number, times, self._spec)

    def adaptive_autorange(self, threshold=0.1, *, min_run_time=0.01, max_run_time=10.0,
                           callback=None):
        """Blocks until the spread (IQR / median) is under threshold, after at
        least min_run_time seconds and 3 blocks, or until max_run_time."""
        number = self._block_size(min_run_time)
        times, total = [], 0.0
        while True:
            t = self._run(number)
            times.append(t)
            total += t
            if callback is not None:
                callback(number, t)
            m = Measurement(number, times, self._spec)
            if (total >= min_run_time and len(times) >= 3 and m.meets_confidence(threshold)) \
                    or total >= max_run_time:
                return m

    def repeat(self, repeat=-1, number=-1):
        raise NotImplementedError("[Timer.repeat] use Timer.blocked_autorange (as PyTorch says)")

    def autorange(self, callback=None):
        raise NotImplementedError("[Timer.autorange] use Timer.blocked_autorange (as PyTorch "
                                  "says)")
