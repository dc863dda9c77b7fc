/*
 * harness.c - the test runner behind harness.h.
 */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

#define MAX_TESTS 1024

static struct {
    const char *name;
    test_fn fn;
} tests[MAX_TESTS];
static int n_tests;
static bool current_failed;

void harness_register(const char *name, test_fn fn) {
    if (n_tests < MAX_TESTS) tests[n_tests++] = (typeof(tests[0])){name, fn};
}

void harness_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "  %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    current_failed = true;
}

bool harness_failed(void) {
    return current_failed;
}

bool harness_has_test(const char *name) {
    for (int i = 0; i < n_tests; i++)
        if (!strcmp(tests[i].name, name)) return true;
    return false;
}

bool test_release_ok(musa_tensor *t) {
    musa_tensor_release(t);
    return t != NULL;
}

static int cmp_tests(const void *a, const void *b) {
    return strcmp(((const typeof(tests[0]) *)a)->name, ((const typeof(tests[0]) *)b)->name);
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    qsort(tests, (size_t)n_tests, sizeof tests[0], cmp_tests);
    for (int i = 0; i < n_tests; i++) {
        if (argc > 1) {
            bool want = false;
            for (int k = 1; k < argc; k++) want |= strcmp(argv[k], tests[i].name) == 0;
            if (!want) continue;
        }
        current_failed = false;
        musa_clear_error();
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        tests[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        printf("%s %s (%.0f ms)\n", current_failed ? "FAIL" : "ok  ", tests[i].name, ms);
        fflush(stdout);
        if (current_failed)
            failed++;
        else
            passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
