/*
 * interrupt.c - long kernels and the Python interpreter: the long-op hook
 * musa calls around kernels over many elements (musa_set_long_op_hook).
 *
 * While such a kernel runs, this thread gives up the GIL (other Python
 * threads run), and on the main thread Ctrl-C is routed to musa_interrupt,
 * so the kernel stops at its next poll and the op fails with
 * MUSA_ERR_INTERRUPTED. The SIGINT is then handed to Python as well
 * (PyErr_SetInterrupt), and pm_raise runs Python's handler, which raises
 * KeyboardInterrupt by default.
 *
 * Invariants: hooks nest (a depth per thread); only the outermost releases
 * the GIL and swaps the handler; the previous handler is always restored
 * before the GIL is taken back; threads that do not hold the GIL (musa's
 * own workers) are left alone.
 */
#include <signal.h>

#include "pymusa.h"

static unsigned long main_thread;
static struct sigaction prev_sigint; /* main thread only */
static volatile sig_atomic_t got_sigint;

static _Thread_local int depth;
static _Thread_local PyThreadState *released;
static _Thread_local bool handler_installed;

static void on_sigint(int sig) {
    (void)sig;
    got_sigint = 1;
    musa_interrupt();
}

static void long_op(bool begin) {
    if (begin) {
        if (depth++ > 0 || !PyGILState_Check()) return;
        if (PyThread_get_thread_ident() == main_thread) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_sigint;
            sigemptyset(&sa.sa_mask);
            handler_installed = sigaction(SIGINT, &sa, &prev_sigint) == 0;
        }
        released = PyEval_SaveThread();
        return;
    }
    if (--depth > 0) return;
    if (handler_installed) {
        sigaction(SIGINT, &prev_sigint, NULL);
        handler_installed = false;
    }
    if (released) {
        PyEval_RestoreThread(released);
        released = NULL;
    }
    if (got_sigint) {
        got_sigint = 0;
        PyErr_SetInterrupt(); /* Python's own handler sees the Ctrl-C too */
    }
}

void pm_long_op(bool begin) {
    long_op(begin);
}

int pm_interrupt_init(void) {
    main_thread = PyThread_get_thread_ident();
    musa_set_long_op_hook(long_op);
    return 0;
}
