"""musa.profiler / musa.Profiler: the seed snippet, events of eager ops,
compiled plans and backward nodes, record_function, memory, threads, the
Chrome trace field by field, the key_averages table, and misuse."""
import json
import os
import threading

import pytest

import musa
import musa.nn as nn
import musa.nn.functional as F
from musa.profiler import profile, record_function


def test_seed_snippet_as_written(tmp_path, monkeypatch):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    config = musa.Config(fusion_level=2)
    input = musa.randn(5, 8)
    compiled_model = model.compile(config=config)
    compiled_model(input)
    print(compiled_model.get_graph())
    monkeypatch.chdir(tmp_path)
    # --- SPEC section 5, as written ---
    profiler = musa.Profiler()
    with profiler:
        compiled_model(input)
    profiler.export_chrome_trace("trace.json")
    # ---
    trace = json.load(open(tmp_path / "trace.json"))
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
    # the plan's instructions, one event each: a fused group names its ops
    assert any(n.startswith("fused(") and "relu" in n for n in names), names
    assert all(e["cat"] == "plan" for e in trace["traceEvents"] if e["ph"] == "X")


def test_module_get_graph_needs_a_compiled_module():
    with pytest.raises(RuntimeError, match=r"\[Module.get_graph\] Linear is not compiled"):
        nn.Linear(2, 2).get_graph()


def by_name(events, kind=None):
    counts = {}
    for e in events:
        if kind is None or e.kind == kind:
            counts[e.name] = counts.get(e.name, 0) + 1
    return counts


def test_counts_equal_the_ops_run():
    a, b = musa.randn(3, 4), musa.randn(3, 4)
    with profile() as prof:
        for _ in range(3):
            c = a + b
        for _ in range(2):
            c = c * a
        musa.exp(c)
    counts = by_name(prof.events(), "op")
    assert counts == {"add": 3, "mul": 2, "exp": 1}
    avg = {r.key: r for r in prof.key_averages()}
    assert avg["add"].count == 3 and avg["mul"].count == 2 and avg["exp"].count == 1
    for r in avg.values():
        assert r.cpu_time_total >= r.self_cpu_time_total >= 0


def test_record_shapes_and_grouping():
    x, y = musa.randn(2, 3), musa.randn(5, 3, dtype=musa.float64)
    with profile(record_shapes=True) as prof:
        x + x
        y + y
        y + y
    shapes = sorted(e.input_shapes for e in prof.events() if e.name == "add")
    assert shapes == ["float32[2, 3], float32[2, 3]", "float64[5, 3], float64[5, 3]",
                      "float64[5, 3], float64[5, 3]"]
    rows = prof.key_averages(group_by_input_shape=True)
    assert sorted((r.input_shapes, r.count) for r in rows if r.key == "add") == [
        ("float32[2, 3], float32[2, 3]", 1), ("float64[5, 3], float64[5, 3]", 2)]
    assert "Input Shapes" in rows.table()
    # without record_shapes, none
    with profile() as prof:
        x + x
    assert [e.input_shapes for e in prof.events()] == [""]


def test_backward_nodes_and_nesting():
    w = musa.randn(4, 4, requires_grad=True)
    x = musa.randn(3, 4)
    with profile() as prof:
        with record_function("step"):
            loss = (x @ w).relu().sum()
            loss.backward()
    ev = prof.events()
    back = by_name(ev, "backward")
    assert back == {"SumBackward": 1, "ReluBackward": 1, "MatmulBackward": 1,
                    "AccumulateGrad": 1}, back
    step = next(e for e in ev if e.name == "step")
    assert step.kind == "user_annotation" and ev[0] is step  # the enclosing event first
    for e in ev[1:]:
        assert step.start_us <= e.start_us and e.end_us <= step.end_us + 1e-3
    rows = {r.key: r for r in prof.key_averages()}
    # the range's self time excludes everything inside it
    inner = sum(e.duration_us for e in ev[1:] if not any(
        o is not e and o.kind != "memory" and o is not step and o.start_us <= e.start_us
        and e.end_us <= o.end_us and o.duration_us > e.duration_us for o in ev[1:]))
    assert rows["step"].self_cpu_time_total == pytest.approx(step.duration_us - inner, abs=1e-2)


def test_record_function_as_decorator_and_off():
    @record_function("helper")
    def helper(t):
        return t * 2

    helper(musa.ones(2))  # no profiler: nothing, no error
    with profile() as prof:
        helper(musa.ones(2))
        helper(musa.ones(2))
    assert by_name(prof.events(), "user_annotation") == {"helper": 2}
    with pytest.raises(TypeError, match=r"\[record_function\] name must be a str"):
        record_function(3)


def test_compiled_training_step_instructions():
    musa.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = musa.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    @musa.jit
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    x, y = musa.randn(4, 6), musa.randint(0, 3, (4,))
    step(x, y)
    step(x, y)
    with profile(record_shapes=True) as prof:
        step(x, y)
    plan = [e for e in prof.events() if e.kind == "plan"]
    assert plan, prof.events()
    upd = [e for e in plan if e.name == "sgd_update"]
    # the four parameters' updates: one multi-tensor instruction
    assert len(upd) == 1 and upd[0].input_shapes == "4 parameters"
    assert any(e.name.startswith("fused(") for e in plan)
    assert not [e for e in prof.events() if e.kind == "op" and e.name == "sgd_update"]


def test_memory_events_and_table_columns():
    with profile(profile_memory=True) as prof:
        with record_function("make"):
            t = musa.zeros(1000)
        del t
    mem = [e for e in prof.events() if e.kind == "memory"]
    size = musa._C._alloc_size(4000)
    allocs = [e for e in mem if e.bytes == size]
    frees = [e for e in mem if e.bytes == -size]
    assert allocs and frees and frees[-1].total_bytes == allocs[0].total_bytes - size
    rows = {r.key: r for r in prof.key_averages()}
    # zeros is the op full: its allocation is its own, and inside the range
    assert rows["full"].self_cpu_memory_usage == rows["full"].cpu_memory_usage == size
    assert rows["make"].self_cpu_memory_usage == 0 and rows["make"].cpu_memory_usage == size
    table = prof.key_averages().table(sort_by="self_cpu_memory_usage")
    assert "Self CPU Mem" in table and f"{size / 1024:.2f} Kb" in table
    with profile() as prof:
        musa.zeros(10)
    assert not [e for e in prof.events() if e.kind == "memory"]
    assert "CPU Mem" not in prof.key_averages().table()


def test_threads_get_their_own_lanes(tmp_path):
    def work():
        a = musa.ones(8)
        for _ in range(20):
            a = a + 1

    with profile() as prof:
        ts = [threading.Thread(target=work) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        work()
    tids = {e.thread for e in prof.events() if e.name == "add"}
    assert len(tids) == 4
    prof.export_chrome_trace(tmp_path / "t.json")
    trace = json.load(open(tmp_path / "t.json"))
    named = {e["tid"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert tids <= named


def test_chrome_trace_field_by_field(tmp_path):
    w = musa.randn(3, 3, requires_grad=True)
    with profile(record_shapes=True, profile_memory=True) as prof:
        with record_function('odd "name"\\ \n'):
            (w * 2).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.load(open(path))
    assert set(trace) == {"traceEvents", "displayTimeUnit"}
    pid = os.getpid()
    seen = {"X": 0, "i": 0, "C": 0, "M": 0}
    for e in trace["traceEvents"]:
        seen[e["ph"]] += 1
        assert e["pid"] == pid and isinstance(e["tid"], int) and isinstance(e["name"], str)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name") and "name" in e["args"]
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert set(e) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
            assert e["cat"] in ("op", "plan", "backward", "user_annotation")
            assert e["dur"] >= 0
        elif e["ph"] == "i":
            assert e["cat"] == "memory" and e["s"] == "t"
            assert isinstance(e["args"]["bytes"], int) and e["args"]["total_bytes"] >= 0
        else:
            assert e["name"] == "allocated bytes" and e["args"]["bytes"] >= 0
    assert seen["X"] == len([e for e in prof.events() if e.kind != "memory"])
    assert seen["i"] == seen["C"] == len([e for e in prof.events() if e.kind == "memory"])
    assert any(e["name"] == 'odd "name"\\ \n' for e in trace["traceEvents"])
    mul = next(e for e in trace["traceEvents"] if e["name"] == "mul")
    assert mul["args"]["input_shapes"] == "float32[3, 3], int64[]"


def test_table_format_and_sorting():
    a = musa.randn(50, 50)
    with profile() as prof:
        for _ in range(5):
            a @ a
        a + a
    avg = prof.key_averages()
    table = avg.table(sort_by="count", row_limit=1)
    lines = table.splitlines()
    assert lines[1].split()[:1] == ["Name"] and "# of Calls" in lines[1]
    assert lines[3].split()[0] == "matmul" and lines[3].split()[-1] == "5"
    assert lines[-1].startswith("Self CPU time total: ")
    assert len([ln for ln in lines if ln.startswith(("matmul", "add"))]) == 1  # row_limit
    with pytest.raises(ValueError, match=r"\[profiler\] sort_by must be one of"):
        avg.table(sort_by="gpu_time")
    assert str(avg) == avg.table()


def test_misuse():
    prof = profile()
    with pytest.raises(RuntimeError, match=r"\[profiler\] events: nothing was recorded"):
        prof.events()
    with pytest.raises(RuntimeError, match=r"\[profiler\] this profiler is not running"):
        prof.stop()
    with prof:
        with pytest.raises(RuntimeError, match=r"already running"):
            profile().start()
        with pytest.raises(RuntimeError, match=r"stop the profiler first"):
            prof.key_averages()
    with pytest.raises(ValueError, match=r"CPU only"):
        profile(activities=["cuda"])
    assert profile(activities=[musa.profiler.ProfilerActivity.CPU]) is not None
    with pytest.raises(OSError, match=r"cannot write /nonexistent-dir/t.json"):
        prof.export_chrome_trace("/nonexistent-dir/t.json")
    # a later session replaces the earlier one's events
    with profile() as p1:
        musa.ones(2) + 1
    with profile() as p2:
        pass
    assert p2.events() == [] and p1.events()  # p1 keeps its own copy


def test_parallel_plan_steps_record_each_instruction_on_its_thread(tmp_path):
    prev = musa.get_num_threads()
    musa.set_num_threads(2)
    try:
        def f(x, y):  # two heavy branches (plans pair no GEMMs)
            return musa.relu(musa.softmax(x, -1)) + musa.relu(musa.softmax(y, -1))

        c = musa.jit(f, config=musa.Config(num_threads=2))
        x, y = musa.randn(128, 128), musa.randn(128, 128)
        c(x, y)
        st = c.plan_stats()
        assert st["parallel_steps"] == 1
        runs = 10
        with profile() as prof:
            for _ in range(runs):
                c(x, y)
        plan = [e for e in prof.events() if e.kind == "plan"]
        assert len(plan) == st["instructions"] * runs, plan
        # a parallel step's two instructions run as tasks of the OpenMP
        # team: on the caller or a worker (which, depends on who is awake
        # first), each event on the thread that ran it, each such thread
        # named in the trace
        assert threading.get_native_id() in {e.thread for e in plan}
        prof.export_chrome_trace(tmp_path / "t.json")
        trace = json.load(open(tmp_path / "t.json"))
        named = {e["tid"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
        assert {e.thread for e in plan} <= named
    finally:
        musa.set_num_threads(prev)


def test_musa_num_threads_sets_the_default():
    import subprocess
    import sys
    code = "import musa; print(musa.get_num_threads())"
    env = dict(os.environ, MUSA_NUM_THREADS="3",
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(musa.__file__))))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "3", out.stderr


def helper_in_another_function(x):
    return x * 3  # the line with_stack names for mul


def test_with_stack_names_the_calling_line():
    import inspect
    x = musa.randn(4, 4)
    line = inspect.getsourcelines(helper_in_another_function)[1] + 1
    with profile(with_stack=True) as prof:
        with record_function("outer"):
            helper_in_another_function(x)
            musa.nn.functional.relu(x)  # inside musa: still this line
    ev = {e.name: e for e in prof.events()}
    assert ev["mul"].stack == [f"test_profiler.py:{line}"]
    relu_line = inspect.currentframe().f_lineno - 3
    assert ev["relu"].stack == [f"test_profiler.py:{relu_line}"]
    assert ev["outer"].stack and ev["outer"].stack[0].startswith("test_profiler.py:")
    rows = prof.key_averages(group_by_stack_n=1)
    assert {r.location for r in rows if r.key == "mul"} == {f"test_profiler.py:{line}"}
    assert "Source Location" in rows.table()
    # without with_stack: no lines
    with profile() as prof:
        helper_in_another_function(x)
    assert all(e.stack == [] for e in prof.events())


def compiled_body(x, w):
    h = x.matmul(w)  # a kernel instruction: its line and inputs
    return (h * 2 + 1).relu()  # a fused group: its last member's line and inputs


def test_plan_instructions_carry_shapes_and_lines():
    import inspect
    line = inspect.getsourcelines(compiled_body)[1]
    x, w = musa.randn(5, 7), musa.randn(7, 3)
    c = musa.jit(compiled_body, config=musa.Config(fusion_level=1))
    c(x, w)
    with profile(record_shapes=True, with_stack=True) as prof:
        c(x, w)
    plan = {e.name: e for e in prof.events() if e.kind == "plan"}
    assert set(plan) == {"matmul", "fused(mul, add, relu)"}, plan
    assert plan["matmul"].input_shapes == "float32[5, 7], float32[7, 3]"
    assert plan["matmul"].stack == [f"test_profiler.py:{line + 1}"]
    assert plan["fused(mul, add, relu)"].input_shapes == "float32[5, 3]"
    assert plan["fused(mul, add, relu)"].stack == [f"test_profiler.py:{line + 2}"]
    rows = prof.key_averages(group_by_input_shape=True)
    assert ("matmul", "float32[5, 7], float32[7, 3]") in {(r.key, r.input_shapes) for r in rows}
    # without the flags, neither
    with profile() as prof:
        c(x, w)
    assert all(e.input_shapes == "" and e.stack == [] for e in prof.events() if e.kind == "plan")


def test_plan_events_outlive_the_plan():
    import gc
    with profile(record_shapes=True, with_stack=True) as prof:
        c = musa.jit(lambda x: (x * 3 + 1).relu())
        x = musa.randn(64)
        c(x)
        c(x)
        del c
        gc.collect()  # the plan, which holds the group's name, is freed
        junk = [musa.randn(64) + i for i in range(200)]  # noqa: F841 (reuses that memory)
    plan = [e for e in prof.events() if e.kind == "plan"]
    assert [e.name for e in plan] == ["fused(mul, add, relu)"] * 2, plan
    assert all(e.input_shapes == "float32[64]" for e in plan)
