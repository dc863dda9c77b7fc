#!/usr/bin/env bash
# run.sh - one entry point for newcomers and CI.
#
#   bash run.sh demo       install build dependencies, build, run the demo
#   bash run.sh test       install dependencies, build, run every test
#   bash run.sh sanitize   build with ASan+UBSan in build-asan/ and run the C tests
#   bash run.sh bench      build and run the benchmarks (prints figures)
#   bash run.sh build      build only (Release, in build/)
#
# Dependencies come from Debian's packages (apt-get); nothing is downloaded
# from anywhere else. Run as root, or as a user with sudo.
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(build-essential cmake gzip libdnnl-dev libopenblas-dev python3-dev python3-numpy
          python3-pytest)
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

case "${1:-}" in
demo)
    setup
    build build
    ./build/linear_regression
    ;;
test)
    setup
    build build
    status=0
    run_c_tests build || status=1
    echo "${C_PASSED} passed, ${C_FAILED} failed"
    exit $status
    ;;
sanitize)
    setup
    build build-asan -DMUSA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug -DMUSA_BUILD_PYTHON=OFF
    status=0
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
        run_c_tests build-asan || status=1
    echo "sanitizers (ASan+UBSan, leak detection on): ${C_PASSED} passed, ${C_FAILED} failed"
    exit $status
    ;;
bench)
    setup
    build build
    for b in build/bench_*; do
        [ -x "$b" ] && "$b"
    done
    ;;
build)
    setup
    build build
    ;;
*)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
