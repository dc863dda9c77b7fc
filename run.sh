#!/usr/bin/env bash
# run.sh - one entry point for newcomers and CI.
#
#   bash run.sh demo       install build dependencies, build, run the demo
#   bash run.sh test       install dependencies, build, run every test
#   bash run.sh sanitize   C tests under ASan+UBSan (build-asan/) and under
#                          ThreadSanitizer (as tsan), Python tests under
#                          PYTHONMALLOC=debug
#   bash run.sh tsan       C tests under ThreadSanitizer (clang, build-tsan/);
#                          tests/c/test_threads.c is the threading suite
#   bash run.sh bench      build and run the benchmarks (prints figures)
#   bash run.sh table      the dynamic-versus-static training table, with
#                          PyTorch rows and a chart in bench/results/ (installs
#                          python3-torch and python3-matplotlib); arguments
#                          after "table" go to bench/bench_train.py
#   bash run.sh build      build only (Release, in build/)
#
# Dependencies come from Debian's packages (apt-get); nothing is downloaded
# from anywhere else. Run as root, or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake gzip libdnnl-dev libopenblas-dev python3-dev python3-numpy
          python3-pytest)
TEST_PACKAGES=(python3-torch) # the reference the Python tests compare against
TABLE_PACKAGES=(python3-torch python3-matplotlib) # the PyTorch rows and the chart
# ThreadSanitizer: clang, its runtime, and LLVM's OpenMP (libomp and Archer,
# which tells TSan about OpenMP's synchronisation; see MUSA_TSAN in CMakeLists.txt)
TSAN_PACKAGES=(clang libclang-rt-dev libomp-dev)
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
    C_PASSED=$passed
    C_FAILED=$failed
    return $status
}

# Run the Python tests (pytest); sets PY_PASSED / PY_FAILED.
run_py_tests() {
    local out status=0
    out=$(mktemp)
    "$PYTHON" -m pytest -q -p no:cacheprovider tests/python "$@" 2>&1 | tee "$out" | grep -v '^\.*\s*\[' || true
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
    build build-tsan -DMUSA_TSAN=ON -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DMUSA_BUILD_PYTHON=OFF
    local status=0
    TSAN_OPTIONS=halt_on_error=1:ignore_noninstrumented_modules=1:second_deadlock_stack=1 \
        run_c_tests build-tsan || status=1
    TSAN_PASSED=$C_PASSED
    TSAN_FAILED=$C_FAILED
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
    setup "${TSAN_PACKAGES[@]}"
    build build-asan -DMUSA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DMUSA_BUILD_PYTHON=OFF
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
    # the Python tests again under CPython's debug allocator (buffer overruns,
    # use after free and API misuse in the extension show up here)
    build build
    echo "== python tests, PYTHONMALLOC=debug"
    PYTHONMALLOC=debug run_py_tests || status=1
    echo "$((C_PASSED + PY_PASSED)) passed, $((C_FAILED + PY_FAILED)) failed"
    exit $status
    ;;
bench)
    setup
    build build
    for b in build/bench_*; do
        [ -x "$b" ] && "$b"
    done
    PYTHONPATH=python "$PYTHON" bench/bench_python.py
    PYTHONPATH=python "$PYTHON" bench/bench_jit.py
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
build)
    setup
    build build
    ;;
*)
    sed -n '2,/^# Dependencies/p' "$0" | sed '$d'
    exit 2
    ;;
esac
