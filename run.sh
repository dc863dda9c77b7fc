#!/usr/bin/env bash
# run.sh - one entry point for newcomers and CI.
#
#   bash run.sh demo       install build dependencies, build, run the demo
#   bash run.sh test       install dependencies, build, run every test
#   bash run.sh sanitize   C tests under ASan+UBSan (build-asan/) and under
#                          ThreadSanitizer (as tsan), a short libFuzzer run,
#                          Python tests under PYTHONMALLOC=debug and under
#                          ASan+UBSan, the Python fuzzer's reproducers and a
#                          bounded fuzz run under ASan
#   bash run.sh tsan       C tests under ThreadSanitizer (clang, build-tsan/);
#                          tests/c/test_threads.c is the threading suite
#   bash run.sh fuzz [s] [name]
#                          build the libFuzzer harnesses (clang, ASan+UBSan, in
#                          build-fuzz/) and run each (op_call: musa_op_call;
#                          file_load: the .musa reader; onnx_load: the C
#                          importer of ONNX files), or only fuzz_<name>,
#                          for s seconds (default 60); crashers land in
#                          tests/fuzz/crashes/<name>/
#   bash run.sh fuzz-py [seconds]
#                          fuzz the Python API under ASan+UBSan (default 60 s;
#                          tests/fuzz/fuzz_py.py, docs/fuzzing.md)
#   bash run.sh bench      build and run the benchmarks (prints figures)
#   bash run.sh onnx-suite the ONNX backend node tests against musa's importer:
#                          passes per op and the total (tests/onnx/suite.py)
#   bash run.sh ddp-demo [n]  the digits CNN trained data-parallel on n
#                          processes (default 2) under mpirun
#   bash run.sh table      the dynamic-versus-static training table, with
#                          PyTorch rows and a chart in bench/results/ (installs
#                          python3-torch and python3-matplotlib); arguments
#                          after "table" go to bench/bench_train.py
#   bash run.sh format     apply .clang-format to every C file (clang-format)
#   bash run.sh format-check  fail, listing them, if any C file is not formatted
#   bash run.sh build      build only (Release, in build/)
#
# Dependencies come from Debian's packages (apt-get); nothing is downloaded
# from anywhere else. Run as root, or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")"

# (protobuf-c: the C importer of ONNX files, src/io/onnx.c)
PACKAGES=(build-essential cmake gzip libdnnl-dev libopenblas-dev libprotobuf-c-dev pkg-config
          protobuf-c-compiler python3-dev python3-numpy python3-pytest)
# the reference the Python tests compare against; make_dot's renderer; Open MPI
# (libmusa_mpi.so, the collectives' backend, and mpirun for the 2-rank tests)
# python3-onnx (musa.onnx's checker, helpers and the backend node tests) and
# python3-matplotlib (SummaryWriter.add_figure's test)
TEST_PACKAGES=(python3-torch graphviz openmpi-bin libopenmpi-dev python3-onnx python3-matplotlib)
BENCH_PACKAGES=(libsleef-dev openmpi-bin libopenmpi-dev) # SLEEF's columns in bench_vmath; bench_dist
TABLE_PACKAGES=(python3-torch python3-matplotlib) # the PyTorch rows and the chart
# ThreadSanitizer: clang, its runtime, and LLVM's OpenMP (libomp and Archer,
# which tells TSan about OpenMP's synchronisation; see MUSA_TSAN in CMakeLists.txt)
TSAN_PACKAGES=(clang libclang-rt-dev libomp-dev)
FUZZ_PACKAGES=(clang libclang-rt-14-dev) # libFuzzer and clang's sanitizer runtimes
PYTHON=/usr/bin/python3       # Debian's interpreter: the extension is built for it
JOBS=$(nproc 2>/dev/null || echo 2)

setup() {
    local missing=()
    for p in "${PACKAGES[@]}" "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        echo "== installing: ${missing[*]}"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

build() { # build DIR [cmake args...]
    local dir=$1
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
    cmake --build "$dir" -j"$JOBS"
}

# The ASan+UBSan build (C tests, and the Python module in build-asan/python:
# see python/CMakeLists.txt).
build_asan() {
    build build-asan -DMUSA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DMUSA_BUILD_PYTHON=ON \
        -DMUSA_PYTHON_PACKAGE_DIR="$PWD/build-asan/python"
}

# Debian's python3 with the ASan-built module: the ASan runtime must be the
# first library loaded (the interpreter is not built with it), with
# libstdc++ (else its __cxa_throw interceptor finds no real function once
# torch, in C++, throws), and CPython leaks by design at exit. Allocations beyond 2 GiB fail (MemoryError), as
# they would on a small machine, instead of taking this one's memory.
asan_python() {
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
        ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=2048:hard_rss_limit_mb=6144 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS=1 \
        PYTHONPATH=build-asan/python "$PYTHON" "$@"
}

# mpirun refuses to run as root unless told
mpi_root_flag() { [ "$(id -u)" = 0 ] && echo --allow-run-as-root || true; }

# Run every C test binary in DIR; print each one's lines and a total.
run_c_tests() {
    local dir=$1 passed=0 failed=0 status=0
    for t in "$dir"/test_*; do
        [ -x "$t" ] || continue
        echo "== $(basename "$t")"
        local out
        out=$("$t" 2>&1) || status=1
        echo "$out" | grep -v '^ok  ' || true
        local line
        line=$(echo "$out" | tail -n 1)
        if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
            passed=$((passed + BASH_REMATCH[1]))
            failed=$((failed + BASH_REMATCH[2]))
        else
            echo "   (no summary line: the binary crashed)"
            failed=$((failed + 1))
            status=1
        fi
    done
    if [ "$passed" = 0 ] && [ "$failed" = 0 ]; then
        echo "   (no test binaries in $dir: the build failed)"
        failed=1
        status=1
    fi
    C_PASSED=$passed
    C_FAILED=$failed
    return $status
}

# Run the Python tests (pytest); sets PY_PASSED / PY_FAILED.
run_py_tests() {
    local out status=0 run=${PY_RUN:-$PYTHON}
    out=$(mktemp)
    "$run" -m pytest -q -p no:cacheprovider tests/python "$@" 2>&1 | tee "$out" | grep -v '^\.*\s*\[' || true
    local line
    line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$out" | tail -n 1)
    PY_PASSED=$(echo "$line" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
    PY_FAILED=$(( $(echo "$line" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 0) +
                  $(echo "$line" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+' || echo 0) ))
    if [ -z "$line" ] || [ "$PY_FAILED" != 0 ]; then status=1; fi
    [ -n "$line" ] || PY_FAILED=1
    rm -f "$out"
    return $status
}

# Build build-tsan/ and run every C test under ThreadSanitizer: any report
# ends its binary (halt_on_error), which counts as a failure. No suppressions:
# ignore_noninstrumented_modules skips the accesses of uninstrumented
# libraries (libomp's, oneDNN's, OpenBLAS's own internals), which TSan cannot
# judge; musa's accesses inside them are still checked. Sets TSAN_PASSED /
# TSAN_FAILED.
run_tsan() {
    # (called as `run_tsan || ...`, where set -e does not apply: check the build)
    build build-tsan -DMUSA_TSAN=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMUSA_BUILD_PYTHON=OFF || { TSAN_PASSED=0; TSAN_FAILED=1; return 1; }
    local status=0
    TSAN_OPTIONS=halt_on_error=1:ignore_noninstrumented_modules=1:second_deadlock_stack=1 \
        run_c_tests build-tsan || status=1
    TSAN_PASSED=$C_PASSED
    TSAN_FAILED=$C_FAILED
    return $status
}

# The libFuzzer harnesses: clang, ASan+UBSan, coverage instrumentation.
fuzz_build() {
    CC=clang cmake -S . -B build-fuzz -DMUSA_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
        -DMUSA_BUILD_PYTHON=OFF -DMUSA_BUILD_TESTS=OFF >/dev/null
    cmake --build build-fuzz -j"$JOBS" --target $FUZZERS
}
FUZZERS="fuzz_op_call fuzz_file_load fuzz_onnx_load" # tests/fuzz/fuzz_<name>.c

# Run harness fuzz_$2 (default op_call) for $1 seconds with one process.
# New corpus entries go to build-fuzz/corpus/$2/ (the seeds in
# tests/fuzz/corpus/$2/ are read only; tests/fuzz/$2.dict, if present, is
# its dictionary); every crash, leak, timeout or out-of-memory input is
# copied to tests/fuzz/crashes/$2/ as a regression file (test_fuzz replays
# them).
# Memory: ASan refuses single allocations over 256 MiB (the library sees a
# clean MUSA_ERR_NOMEM); libFuzzer's own malloc limit sits above that (at
# 256 it also flagged a malloc of exactly 256 MiB, which ASan allows), and
# 3 GiB of RSS is a finding, as is a run past 30 s (-timeout); one past 10 s
# (libFuzzer's slow-unit) is shown and kept in build-fuzz/slow/ only. Sets
# FUZZ_EXECS; fails when anything was found.
fuzz_run() {
    local secs=$1 name=${2:-op_call} dict=()
    [ -f "tests/fuzz/$name.dict" ] && dict=("-dict=tests/fuzz/$name.dict")
    local work=build-fuzz/corpus/$name art=build-fuzz/artifacts/$name/ keep=tests/fuzz/crashes/$name
    mkdir -p "$work" "$art" "$keep"
    rm -f "$art"*
    local log status=0
    log=$(mktemp)
    ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1 \
        UBSAN_OPTIONS=print_stacktrace=1 \
        build-fuzz/fuzz_$name "$work" "tests/fuzz/corpus/$name" -max_total_time="$secs" \
        -rss_limit_mb=3072 -malloc_limit_mb=512 -timeout=30 -print_final_stats=1 \
        -artifact_prefix="$art" "${dict[@]}" >"$log" 2>&1 || status=1
    grep -E "FINDING|ERROR|SUMMARY|runtime error" "$log" | head -n 20 || true
    FUZZ_EXECS=$(grep -oE 'number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+' || echo 0)
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log" || true
    for f in "$art"*; do
        [ -f "$f" ] || continue
        case $(basename "$f") in
        slow-unit-*) # over 10 s but under the timeout: legitimate heavy models
            # exist (an ONNX Resize by 131072), so it is shown, not failed
            mkdir -p build-fuzz/slow/$name
            cp "$f" build-fuzz/slow/$name/
            echo "== a slow input (10 to 30 s): build-fuzz/slow/$name/$(basename "$f")"
            continue ;;
        esac
        cp "$f" "$keep/$(basename "$f")"
        echo "== kept $keep/$(basename "$f") (rename it after the bug; test_fuzz replays it)"
        status=1
    done
    rm -f "$log"
    return $status
}

case "${1:-}" in
demo)
    setup
    build build
    PYTHONPATH=python "$PYTHON" examples/train_digits.py
    ;;
test)
    setup "${TEST_PACKAGES[@]}"
    build build
    status=0
    run_c_tests build || status=1
    echo "== python tests"
    run_py_tests || status=1
    echo "C: ${C_PASSED} passed, ${C_FAILED} failed; Python: ${PY_PASSED} passed, ${PY_FAILED} failed"
    echo "$((C_PASSED + PY_PASSED)) passed, $((C_FAILED + PY_FAILED)) failed"
    exit $status
    ;;
sanitize)
    setup "${TEST_PACKAGES[@]}" "${TSAN_PACKAGES[@]}" "${FUZZ_PACKAGES[@]}"
    build_asan
    status=0
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
        run_c_tests build-asan || status=1
    echo "sanitizers (ASan+UBSan, leak detection on): ${C_PASSED} passed, ${C_FAILED} failed"
    ASAN_PASSED=$C_PASSED
    ASAN_FAILED=$C_FAILED
    run_tsan || status=1
    echo "ThreadSanitizer: ${TSAN_PASSED} passed, ${TSAN_FAILED} failed"
    C_PASSED=$((ASAN_PASSED + TSAN_PASSED))
    C_FAILED=$((ASAN_FAILED + TSAN_FAILED))
    # a short fuzz run (the kept crashers were replayed by test_fuzz above)
    fuzz_build
    for target in op_call:25 file_load:15 onnx_load:15; do
        echo "== fuzz_${target%:*}, ${target#*:} s"
        if fuzz_run "${target#*:}" "${target%:*}"; then
            echo "fuzz smoke: clean, ${FUZZ_EXECS} executions"
            C_PASSED=$((C_PASSED + 1))
        else
            echo "fuzz smoke: FOUND SOMETHING (${FUZZ_EXECS} executions)"
            C_FAILED=$((C_FAILED + 1))
            status=1
        fi
    done
    # the Python tests again under CPython's debug allocator (buffer overruns,
    # use after free and API misuse in the extension show up here)
    build build
    echo "== python tests, PYTHONMALLOC=debug"
    PYTHONMALLOC=debug run_py_tests || status=1
    DEBUG_PASSED=$PY_PASSED
    DEBUG_FAILED=$PY_FAILED
    # and under ASan+UBSan, CPython's objects too through ASan's malloc: the
    # C paths only Python reaches (the ONNX importer's double release was
    # found here), about 4 minutes
    echo "== python tests under ASan+UBSan"
    PYTHONMALLOC=malloc PY_RUN=asan_python run_py_tests || status=1
    PY_PASSED=$((PY_PASSED + DEBUG_PASSED))
    PY_FAILED=$((PY_FAILED + DEBUG_FAILED))
    # the Python fuzzer under ASan: every reproducer it ever wrote must now
    # run cleanly, then a bounded run from a fixed seed (15 batches of 200
    # calls: about a minute here, stopped at 4 minutes on a slow machine)
    echo "== python fuzzer: reproducers (tests/fuzz/crashes/py), ASan"
    FZ_PASSED=0
    FZ_FAILED=0
    out=$(asan_python tests/fuzz/fuzz_py.py --replay tests/fuzz/crashes/py 2>&1) || status=1
    echo "$out" | grep -v '^ok  ' || true
    if [[ $(echo "$out" | tail -n 1) =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
        FZ_PASSED=${BASH_REMATCH[1]}
        FZ_FAILED=${BASH_REMATCH[2]}
    else
        FZ_FAILED=1
    fi
    echo "== python fuzzer: seeds 1-15 under ASan"
    if asan_python tests/fuzz/fuzz_py.py --seed 1 --batches 15 --seconds 240 \
        --out build-asan/fuzz-py --crash-dir build-asan/fuzz-py/crashes; then
        FZ_PASSED=$((FZ_PASSED + 1))
    else
        FZ_FAILED=$((FZ_FAILED + 1))
        status=1
    fi
    echo "$((C_PASSED + PY_PASSED + FZ_PASSED)) passed, $((C_FAILED + PY_FAILED + FZ_FAILED)) failed"
    exit $status
    ;;
fuzz)
    setup "${FUZZ_PACKAGES[@]}"
    fuzz_build
    secs=${2:-60}
    status=0
    for name in ${3:-op_call file_load onnx_load}; do
        echo "== fuzz_${name}, ${secs} s"
        if fuzz_run "$secs" "$name"; then
            echo "fuzz: clean, ${FUZZ_EXECS} executions"
        else
            echo "fuzz: found something (${FUZZ_EXECS} executions); see above"
            status=1
        fi
    done
    exit $status
    ;;
fuzz-py)
    setup "${TEST_PACKAGES[@]}"
    build_asan
    asan_python tests/fuzz/fuzz_py.py --seconds "${2:-60}" --seed "${FUZZ_SEED:-$RANDOM}" \
        --out build-asan/fuzz-py
    ;;
bench)
    setup "${BENCH_PACKAGES[@]}"
    build build
    for b in build/bench_*; do
        [ -x "$b" ] && [ "$b" != build/bench_dist ] && "$b"
    done
    # the collectives, 2 ranks: musa's all_reduce against MPI_Allreduce
    mpirun -np 2 --oversubscribe $(mpi_root_flag) build/bench_dist
    PYTHONPATH=python "$PYTHON" bench/bench_allreduce.py # over TCP and MPI, against memcpy
    PYTHONPATH=python "$PYTHON" bench/bench_python.py
    "$PYTHON" bench/bench_ops.py # eager ops against PyTorch
    PYTHONPATH=python "$PYTHON" bench/bench_jit.py
    MUSA_NUM_THREADS=1 PYTHONPATH=python "$PYTHON" bench/bench_math.py
    PYTHONPATH=python "$PYTHON" bench/bench_bf16.py
    PYTHONPATH=python "$PYTHON" bench/bench_bounds.py # the GEMMs' bound on the table's ratios
    PYTHONPATH=python "$PYTHON" bench/bench_streams.py
    PYTHONPATH=python "$PYTHON" bench/bench_loader.py
    PYTHONPATH=python "$PYTHON" bench/bench_ddp.py # 1 and 2 processes, ResNet-18, MPI and TCP
    ;;
onnx-suite)
    setup python3-onnx
    build build
    PYTHONPATH=python "$PYTHON" tests/onnx/suite.py "${@:2}"
    ;;
ddp-demo)
    setup openmpi-bin libopenmpi-dev
    build build
    mpirun -np "${2:-2}" --oversubscribe $(mpi_root_flag) "$PYTHON" examples/train_digits_ddp.py
    ;;
table)
    shift
    setup "${TABLE_PACKAGES[@]}"
    build build
    mkdir -p bench/results # table.png and table.json (git-ignored: generated)
    PYTHONPATH=python "$PYTHON" bench/bench_train.py "$@"
    ;;
tsan)
    setup "${TSAN_PACKAGES[@]}"
    status=0
    run_tsan || status=1
    echo "${TSAN_PASSED} passed, ${TSAN_FAILED} failed"
    exit $status
    ;;
format | format-check)
    setup clang-format
    # tracked files and new ones not yet added (not ignored ones: build trees)
    mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.c' '*.h')
    if [ "$1" = format ]; then
        clang-format -i "${files[@]}"
    else
        clang-format --dry-run -Werror "${files[@]}" 2>&1 | grep -E '^[^ ].*: error' || true
        if ! clang-format --dry-run -Werror "${files[@]}" >/dev/null 2>&1; then
            echo "format-check: C files differ from .clang-format (fix: bash run.sh format)"
            exit 1
        fi
        echo "format-check: ${#files[@]} C files formatted"
    fi
    ;;
build)
    setup
    build build
    ;;
*)
    sed -n '2,/^# Dependencies/p' "$0" | sed '$d'
    exit 2
    ;;
esac
