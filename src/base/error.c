/*
 * error.c - the thread-local last error, and the small libc wrappers that set
 * it on failure.
 *
 * Invariants: the message buffer is always NUL-terminated; setting an error
 * never allocates (so out-of-memory can be reported); nothing here prints.
 */
#include "base.h"

#include <stdio.h>
#include <time.h>

typedef struct {
    int code;
    char msg[1024];
    const char *file; /* borrowed: points at a string with static or interned lifetime */
    int line;
} musa_error_state;

static _Thread_local musa_error_state tls_error;

static int set_error(int code, const char *fmt, va_list ap) {
    tls_error.msg[0] = '\0';
    if (fmt) vsnprintf(tls_error.msg, sizeof tls_error.msg, fmt, ap);
    tls_error.code = code;
    tls_error.file = NULL;
    tls_error.line = 0;
    return code;
}

int musa_err(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(code, fmt, ap);
    va_end(ap);
    return code;
}

int musa_err_nomem(const char *where, size_t bytes) {
    return musa_err(MUSA_ERR_NOMEM, "[%s] out of memory allocating %zu bytes", where, bytes);
}

void musa_err_prefix(const char *where) {
    if (tls_error.msg[0] == '[') return;
    char tmp[sizeof tls_error.msg];
    size_t n = (size_t)snprintf(tmp, sizeof tmp, "[%s] ", where);
    if (n >= sizeof tmp) return;
    size_t rest = strnlen(tls_error.msg, sizeof tls_error.msg - 1 - n);
    memcpy(tmp + n, tls_error.msg, rest);
    tmp[n + rest] = '\0';
    memcpy(tls_error.msg, tmp, sizeof tmp);
}

const char *musa_last_error(void) {
    return tls_error.msg;
}
int musa_last_error_code(void) {
    return tls_error.code;
}

void musa_last_error_location(const char **file, int *line) {
    if (file) *file = tls_error.file;
    if (line) *line = tls_error.line;
}

void musa_set_error_location(const char *file, int line) {
    tls_error.file = file;
    tls_error.line = line;
}

int musa_set_error(int code, const char *fmt, ...) {
    if (code >= 0) code = MUSA_ERR_RUNTIME; /* an error needs an error status */
    va_list ap;
    va_start(ap, fmt);
    set_error(code, fmt, ap);
    va_end(ap);
    return code;
}

void musa_clear_error(void) {
    tls_error.code = MUSA_OK;
    tls_error.msg[0] = '\0';
    tls_error.file = NULL;
    tls_error.line = 0;
}

const char *musa_status_name(int code) {
    switch (code) {
    case MUSA_OK:
        return "MUSA_OK";
    case MUSA_ERR_VALUE:
        return "MUSA_ERR_VALUE";
    case MUSA_ERR_TYPE:
        return "MUSA_ERR_TYPE";
    case MUSA_ERR_INDEX:
        return "MUSA_ERR_INDEX";
    case MUSA_ERR_RUNTIME:
        return "MUSA_ERR_RUNTIME";
    case MUSA_ERR_NOMEM:
        return "MUSA_ERR_NOMEM";
    case MUSA_ERR_NOT_IMPLEMENTED:
        return "MUSA_ERR_NOT_IMPLEMENTED";
    case MUSA_ERR_IO:
        return "MUSA_ERR_IO";
    case MUSA_ERR_DEVICE:
        return "MUSA_ERR_DEVICE";
    case MUSA_ERR_ZERO_DIVISION:
        return "MUSA_ERR_ZERO_DIVISION";
    case MUSA_ERR_INTERRUPTED:
        return "MUSA_ERR_INTERRUPTED";
    case MUSA_ERR_LINALG:
        return "MUSA_ERR_LINALG";
    default:
        return "MUSA_ERR_UNKNOWN";
    }
}

_Noreturn void musa_internal_abort(const char *file, int line, const char *what) {
    /* Internal invariants only: reaching this is a bug in musa itself. */
    fprintf(stderr, "musa: internal error at %s:%d: %s\n", file, line, what);
    abort();
}

void *musa_malloc(size_t bytes, const char *where) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) musa_err_nomem(where, bytes);
    return p;
}

void *musa_calloc(size_t n, size_t size, const char *where) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) musa_err_nomem(where, n * size);
    return p;
}

void *musa_realloc(void *p, size_t bytes, const char *where) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) musa_err_nomem(where, bytes);
    return q;
}

uint64_t musa_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

char *musa_shape_str(int ndim, const int64_t *shape, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (ndim == 1 && n < size) n += (size_t)snprintf(buf + n, size - n, ",");
    if (n < size) snprintf(buf + n, size - n, ")");
    return buf;
}
