/*
 * harness.h - a small test runner: TEST(name) registers a test, CHECK*
 * macros record failures (a failed CHECK ends its test), and main() runs
 * every test and ends with "N passed, M failed".
 *
 * A test may also be selected by name: ./test_x name1 name2.
 */
#ifndef MUSA_TEST_HARNESS_H
#define MUSA_TEST_HARNESS_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "musa.h"

typedef void (*test_fn)(void);
void harness_register(const char *name, test_fn fn);
void harness_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool harness_failed(void);

#define TEST(name)                                                                                 \
    static void name(void);                                                                        \
    __attribute__((constructor)) static void reg_##name(void) {                                    \
        harness_register(#name, name);                                                             \
    }                                                                                              \
    static void name(void)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            harness_fail(__FILE__, __LINE__, "CHECK(%s) failed; last error: %s", #cond,            \
                         musa_last_error());                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            harness_fail(__FILE__, __LINE__, __VA_ARGS__);                                         \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ != MUSA_OK) {                                                                      \
            harness_fail(__FILE__, __LINE__, "%s returned %s: %s", #expr, musa_status_name(rc_),   \
                         musa_last_error());                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tol))) {                                                           \
            harness_fail(__FILE__, __LINE__, "%s = %.17g, expected %.17g (tol %g)", #a, a_, b_,    \
                         (double)(tol));                                                           \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* The expression must fail with `code` and a message containing `substr`. */
#define CHECK_ERR(ok_expr, code, substr)                                                           \
    do {                                                                                           \
        musa_clear_error();                                                                        \
        bool ok_ = (ok_expr);                                                                      \
        if (ok_) {                                                                                 \
            harness_fail(__FILE__, __LINE__, "%s succeeded; expected %s", #ok_expr,                \
                         musa_status_name(code));                                                  \
            return;                                                                                \
        }                                                                                          \
        if (musa_last_error_code() != (code) || !strstr(musa_last_error(), (substr))) {            \
            harness_fail(__FILE__, __LINE__,                                                       \
                         "%s failed with %s '%s'; expected %s containing '%s'", #ok_expr,          \
                         musa_status_name(musa_last_error_code()), musa_last_error(),              \
                         musa_status_name(code), (substr));                                        \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* Shorthands for the error tests: a pointer call that must return NULL. */
#define FAILS(ptr_expr) (test_release_ok(ptr_expr))
bool test_release_ok(musa_tensor *t); /* releases t; true if t was non-NULL */

#endif
