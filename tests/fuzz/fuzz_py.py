"""fuzz_py.py - random calls of musa's whole Python API, compared with PyTorch.

    PYTHONPATH=python /usr/bin/python3 tests/fuzz/fuzz_py.py --seconds 60
    bash run.sh fuzz-py [seconds]        the same against the ASan build
    fuzz_py.py --replay tests/fuzz/crashes/py   every reproducer runs cleanly

Every public function of musa and musa.nn.functional, every Tensor method,
operator and property is called with random arguments: tensors of every
dtype (0-d, empty, non-contiguous views, expanded views of 2**40 and more
elements that nothing materialises), sizes that overflow, Python scalars at
the edges (2**63, 2**70, nan, inf, True), None, lists, strings, dtypes and
devices. Arguments are mostly of the kind the parameter wants (its binding
spec, or its name), so calls get past argument checks; a few are anything.

A call is Python source (one line per argument, then the call), built from
the seed alone, so a call is reproduced by its seed and index, and the same
source evaluated with `musa` bound to torch gives PyTorch's answer.

Batches of calls run in a child process (--child); the parent watches it:
  crash      the child died by a signal, or a sanitizer reported (ASan,
             UBSan), or a small call ran past its time limit. The call is
             re-run alone (then, if that passes, the batch up to it, one call
             after another and minimised) and its reproducer is written to
             tests/fuzz/crashes/py/<function>_<kind>_<hash>.py
  error      an exception other than TypeError, ValueError, IndexError,
             RuntimeError, MemoryError, NotImplementedError, OverflowError,
             or one whose message does not start with "[name]" (Python's own
             argument-count errors aside): SystemError, AttributeError, ...
             Reproducers are written as for crashes.
  mismatch   musa and torch both succeed on the same arguments and disagree
             (shape, or values beyond the dtype's tolerance).
  accepted   musa succeeds where torch rejects the input (logged only: musa
             may legitimately be more permissive).
  slow       a call with huge arguments ran past its time limit (logged only:
             summing 2**40 elements takes that long anywhere).
The first three fail the run (exit status 1). Everything goes to
<out>/findings.jsonl and a summary on stdout.
"""
import argparse
import hashlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time

from pyfuzz.api import api
from pyfuzz.check import PYTHON_OP_ERRORS, PYTHON_SIG_ERRORS, child
from pyfuzz.gen import generate

HERE = os.path.dirname(os.path.abspath(__file__))
CRASH_DIR = os.path.join(HERE, "crashes", "py")

# ---------------------------------------------------------------- the parent

SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)[^\n]*|"
                       r"runtime error: [^\n]*|Fatal Python error: [^\n]*")


class Runner:
    """Runs children, collects records, names and reproduces crashes."""

    def __init__(self, args):
        self.args = args
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        self.log = open(os.path.join(self.out, "findings.jsonl"), "w")
        self.calls = 0
        self.reached, self.succeeded, self.functions = set(), set(), set()
        self.counts = {}
        self.findings = {}  # dedupe key -> finding
        self.failures = 0
        self.children = 0

    def spawn(self, seed, start, end, capture=None):
        r, w = os.pipe()
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(seed), str(start),
               str(end), str(w)]
        if self.args.no_torch:
            cmd.append("--no-torch")
        err = open(capture or os.path.join(self.out, "child.stderr"), "w+")
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                             pass_fds=(w,), start_new_session=True,
                             preexec_fn=limit_memory)
        os.close(w)
        return p, os.fdopen(r, "r"), err

    def run_batch(self, seed, start, end, deadline):
        """Run the calls of one batch, restarting after a crash or timeout
        from the next call. Returns the calls run."""
        i = start
        while i < end and time.time() < deadline:
            self.children += 1
            p, rep, err = self.spawn(seed, i, end)
            last, ok, booting = None, False, True
            sel = selectors.DefaultSelector()
            sel.register(rep, selectors.EVENT_READ)
            limit = self.args.call_timeout
            t0 = time.time()
            buf = ""
            timed_out = False
            while True:
                events = sel.select(timeout=0.5)
                if events:
                    chunk = os.read(rep.fileno(), 1 << 16).decode(errors="replace")
                    if not chunk:
                        break
                    buf += chunk
                    while "\n" in buf:
                        line, buf = buf.split("\n", 1)
                        if line.startswith("B "):
                            last = json.loads(line[2:])
                            t0, booting = time.time(), False
                            limit = self.args.big_timeout if last["big"] else self.args.call_timeout
                        elif line.startswith("T ") and last:
                            last["torch"] = True
                        elif line.startswith("R "):
                            self.record(json.loads(line[2:]), last)
                            i = last["i"] + 1
                            last = None
                        elif line == "DONE":
                            ok = True
                if time.time() - t0 > (self.args.startup if booting else limit):
                    timed_out = True
                    os.killpg(p.pid, signal.SIGKILL)
                    break
            sel.close()
            rep.close()
            rc = p.wait()
            err.seek(0)
            stderr = err.read()
            err.close()
            if ok and rc == 0:
                return
            if last is None:  # died between calls (at start-up, or at exit)
                self.failure("crash", {"fn": "<child>", "src": "", "i": i},
                             f"child exited with {rc} outside a call\n{stderr[-2000:]}", seed)
                return
            self.calls += 1
            self.reached.add(last["fn"])
            if last.get("torch"):  # PyTorch's own crash (or hang): not ours
                self.note("torch-crash", last, stderr[-2000:] or "timeout", seed)
            elif timed_out:
                if last["big"]:
                    self.note("slow", last, f"ran past {limit} s", seed)
                else:
                    self.failure("timeout", last, f"ran past {limit} s", seed, start)
            else:
                m = SANITIZER.search(stderr)
                what = m.group(0) if m else f"exit status {rc} ({signame(rc)})"
                self.failure(crash_kind(stderr, rc), last, what + "\n" + stderr[-3000:], seed, start)
            i = last["i"] + 1

    def record(self, rec, started):
        self.calls += 1
        fn = rec["fn"]
        self.functions.add(fn)
        self.counts[rec["outcome"]] = self.counts.get(rec["outcome"], 0) + 1
        if rec["outcome"] != "argerr":
            self.reached.add(fn)
        if rec["outcome"] == "ok":
            self.succeeded.add(fn)
        if rec.get("torch") == "ok" and rec["outcome"] == "raised":
            self.counts["stricter"] = self.counts.get("stricter", 0) + 1
        f = rec.get("finding")
        if not f:
            return
        started = dict(started, i=rec["i"])
        if f["kind"] == "error":
            self.failure("error", started, f["detail"], self.args.seed_now)
        elif f["kind"] == "mismatch":
            self.failure("mismatch", started, f["detail"], self.args.seed_now)
        else:
            self.note(f["kind"], started, f["detail"], self.args.seed_now)

    def key(self, kind, fn, detail):
        """Findings alike up to numbers and quoted names count once."""
        sig = re.sub(r"'[^']*'|0x[0-9a-f]+|\d+", "N", detail.split("\n")[0])[:120]
        return (kind, fn, sig)

    def note(self, kind, call, detail, seed):
        k = self.key(kind, call["fn"], detail)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if k in self.findings:
            return
        self.findings[k] = True
        self.write_log(kind, call, detail, seed)

    def write_log(self, kind, call, detail, seed, repro=None):
        self.log.write(json.dumps({"kind": kind, "fn": call["fn"], "seed": seed, "i": call["i"],
                                   "detail": detail[:4000], "src": call.get("src"),
                                   "reproducer": repro}) + "\n")
        self.log.flush()

    def failure(self, kind, call, detail, seed, start=None):
        k = self.key(kind, call["fn"], detail)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if k in self.findings:
            return
        self.findings[k] = True
        self.failures += 1
        repro = None
        if kind not in ("mismatch",) and call.get("src"):
            repro = self.reproduce(kind, call, detail, seed, start)
        first = detail.split("\n")[0]
        print(f"  {kind.upper()}: {call['fn']} (seed {seed}, call {call['i']}): {first}"
              + (f"\n    reproducer: {os.path.relpath(repro)}" if repro else ""), flush=True)
        if kind == "mismatch":
            print("    " + call["src"].replace("\n", "\n    "), flush=True)
        self.write_log(kind, call, detail, seed, repro)

    def reproduce(self, kind, call, detail, seed, start):
        """Write the reproducer: the call alone if it fails alone, else the
        calls of its batch up to it, minimised."""
        calls = [call["src"]]
        if kind != "error" and not self.fails(calls):
            targets = api_cached()
            calls = [generate(targets, seed, j).source() for j in range(start or 0, call["i"] + 1)]
            if self.fails(calls):
                calls = minimise(calls, self.fails)
            else:
                calls = [call["src"]]  # not reproducible: keep the call for the record
        name = re.sub(r"[^\w]+", "_", call["fn"]).strip("_")
        where = re.search(r"[\w/]+\.c:\d+", detail)  # the sanitizer's source line, if any
        key = detail.split("\n")[0] + (where.group(0) if where else "")
        h = hashlib.sha1(key.encode()).hexdigest()[:6]
        os.makedirs(self.args.crash_dir, exist_ok=True)
        path = os.path.join(self.args.crash_dir, f"{name}_{kind}_{h}.py")
        n = 2
        while os.path.exists(path):  # never overwrite an earlier finding
            path = os.path.join(self.args.crash_dir, f"{name}_{kind}_{h}_{n}.py")
            n += 1
        with open(path, "w") as f:
            f.write(reproducer_text(call["fn"], kind, detail, seed, call["i"], calls))
        return path

    def fails(self, calls):
        src = reproducer_text("?", "?", "?", 0, 0, calls)
        path = os.path.join(self.out, "candidate.py")
        with open(path, "w") as f:
            f.write(src)
        return not run_reproducer(path, self.args.call_timeout * max(1, len(calls)))[0]

    def summary(self, seconds):
        c = self.counts
        lines = [
            f"fuzz-py: {self.calls} calls in {seconds:.0f} s ({self.children} children); "
            f"{len(self.reached)} of {len(api_cached())} functions reached, "
            f"{len(self.succeeded)} succeeded at least once",
            f"  outcomes: {c.get('ok', 0)} ok, {c.get('raised', 0)} raised "
            f"({c.get('stricter', 0)} where torch accepts), {c.get('argerr', 0)} bad arguments",
            f"  findings: {c.get('crash', 0) + c.get('asan', 0) + c.get('ubsan', 0) + c.get('timeout', 0)} "
            f"crashes, {c.get('error', 0)} non-standard errors, {c.get('mismatch', 0)} wrong values; "
            f"logged: {c.get('accepted', 0)} accepted where torch rejects, {c.get('dtype', 0)} other "
            f"result dtypes, {c.get('numerics', 0)} inf/nan differences from inputs at the edges, "
            f"{c.get('slow', 0)} slow, {c.get('torch-crash', 0)} torch crashes",
            f"  log: {os.path.relpath(self.log.name)}",
        ]
        return "\n".join(lines)


_API = None


def api_cached():
    global _API
    if _API is None:
        _API = api()
    return _API


def minimise(calls, fails):
    """Drop calls while the rest still fails (delta debugging, coarse to fine)."""
    n = 2
    while len(calls) > 1:
        chunk = max(1, len(calls) // n)
        for k in range(0, len(calls), chunk):
            rest = calls[:k] + calls[k + chunk:]
            if rest and fails(rest):
                calls = rest
                n = max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(n * 2, len(calls))
    return calls


def crash_kind(stderr, rc):
    if "runtime error:" in stderr or "UndefinedBehaviorSanitizer" in stderr:
        return "ubsan"  # (first: ASan's allocation warnings may precede it)
    if "ERROR: AddressSanitizer" in stderr:
        return "asan"
    return "crash"


def signame(rc):
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return "no signal"


def limit_memory():
    """Child processes: a cap on memory, so a huge allocation fails instead
    of swapping the machine (ASan has its own: max_allocation_size_mb)."""
    import resource
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        cap = 16 << 30
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


REPRO_HEAD = '''"""{title}

{detail}

Found by tests/fuzz/fuzz_py.py (batch seed {seed}, call {i}); replayed by
`bash run.sh sanitize` (fuzz_py.py --replay), which requires it to run without
a crash and to raise, if anything, a standard exception whose message starts
with "[name]".
"""
import copy
import math
import operator
import pickle
import re
from math import inf, nan

import numpy as np

import musa
import musa.nn.functional as F

STANDARD = (TypeError, ValueError, IndexError, RuntimeError, MemoryError, NotImplementedError,
            OverflowError, ZeroDivisionError, BufferError)
PYTHON_OWN = re.compile({python_own!r})  # Python's own argument and operator errors


def check(call):
    try:
        call()
    except STANDARD as e:
        print(f"{{type(e).__name__}}: {{e}}")
        if not str(e).startswith("[") and not PYTHON_OWN.search(str(e)):
            raise
'''


def reproducer_text(fn, kind, detail, seed, i, calls):
    body = []
    for k, src in enumerate(calls):
        body.append(f"\n\ndef call_{k}():\n" + "\n".join("    " + s for s in src.split("\n")))
    body.append("\n\n" + "\n".join(f"check(call_{k})" for k in range(len(calls))) + "\n")
    detail = "\n".join(line[:100] for line in detail.split("\n")[:6]).replace('"""', "'''")
    return REPRO_HEAD.format(title=f"{fn}: {kind}", detail=detail, seed=seed, i=i,
                             python_own=PYTHON_SIG_ERRORS.pattern + "|" + PYTHON_OP_ERRORS.pattern) + \
        "".join(body)


def run_reproducer(path, timeout):
    """Run one reproducer file; (passed, what happened)."""
    try:
        p = subprocess.run([sys.executable, path], capture_output=True, text=True,
                           timeout=timeout, preexec_fn=limit_memory)
    except subprocess.TimeoutExpired:
        return False, f"ran past {timeout} s"
    if p.returncode == 0 and not SANITIZER.search(p.stderr):
        return True, (p.stdout.strip().split("\n") or [""])[-1]
    m = SANITIZER.search(p.stderr)
    return False, (m.group(0) if m else p.stderr.strip().split("\n")[-1] if p.stderr.strip()
                   else f"exit status {p.returncode}")


def replay(directory, timeout):
    """Run every reproducer in directory; print 'N passed, M failed'."""
    files = sorted(f for f in os.listdir(directory) if f.endswith(".py")) if os.path.isdir(directory) else []
    passed = failed = 0
    for f in files:
        ok, what = run_reproducer(os.path.join(directory, f), timeout)
        print(f"{'ok  ' if ok else 'FAIL'} {f}: {what}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return failed == 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60, help="time budget of the run")
    ap.add_argument("--batches", type=int, default=0,
                    help="stop after this many batches (0: when the time is up)")
    ap.add_argument("--seed", type=int, default=1, help="first batch seed (batches use seed, seed+1, ...)")
    ap.add_argument("--calls", type=int, default=200, help="calls per child process")
    ap.add_argument("--call-timeout", type=float, default=20.0, help="seconds a small call may take")
    ap.add_argument("--big-timeout", type=float, default=3.0, help="seconds a call with huge arguments may take")
    ap.add_argument("--startup", type=float, default=30.0, help="seconds a child may take to start")
    ap.add_argument("--out", default="build/fuzz-py", help="directory of the log")
    ap.add_argument("--crash-dir", default=CRASH_DIR, help="where reproducers are written")
    ap.add_argument("--replay", metavar="DIR", help="run every reproducer in DIR and exit")
    ap.add_argument("--show", nargs=2, type=int, metavar=("SEED", "I"), help="print call I of batch SEED")
    ap.add_argument("--child", nargs=4, type=int, help=argparse.SUPPRESS)
    ap.add_argument("--no-torch", action="store_true", help="do not compare with PyTorch")
    args = ap.parse_args()
    if args.child:
        seed, start, end, fd = args.child
        child(seed, start, end, fd, not args.no_torch)
        return 0
    if args.show:
        print(generate(api(), *args.show).source())
        return 0
    if args.replay:
        return 0 if replay(args.replay, 60) else 1
    runner = Runner(args)
    t0 = time.time()
    deadline = t0 + args.seconds
    seed = args.seed
    print(f"fuzz-py: batches of {args.calls} calls from seed {seed}, {args.seconds:.0f} s", flush=True)
    while time.time() < deadline and (not args.batches or seed < args.seed + args.batches):
        args.seed_now = seed
        runner.run_batch(seed, 0, args.calls, deadline)
        seed += 1
    print(f"  last batch seed {seed - 1}")
    print(runner.summary(time.time() - t0))
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
