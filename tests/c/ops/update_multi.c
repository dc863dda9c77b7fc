/*
 * update_multi.c - musa_update_multi, the multi-tensor form of the update
 * rows: bitwise the results of musa_op_call row by row (every option of
 * sgd_update, adam_update and rmsprop_update, float32 and float64, rows of
 * 0, 1 and 40,000 elements and 0-d, on 1 and 3 threads, so parallel chunks
 * start inside rows and span several); rows the dispatcher would not run in
 * place (strided, lr to cast, a row sharing a tensor with another); version
 * counters; which rows run together (the profiler's events: one per
 * kernel call), views of one storage included; and the errors, which name
 * the row and leave every tensor as it was.
 */
#include "../util.h"
#include "backend/cpu/kernels.h"
#include "ops/op.h"

/* The INPLACE rows and the kernels with a multi-tensor form are one list. */
TEST(every_update_row_has_a_multi_tensor_form) {
    int n = 0;
    for (int op = 0; op < MUSA_OP_COUNT; op++) {
        bool update = (musa_ops[op].flags & MUSA_OPF_INPLACE) != 0;
        CHECK_MSG(update == cpu_update_has_multi(musa_ops[op].kernel),
                  "%s: INPLACE %d, multi-tensor form %d", musa_ops[op].name, update, !update);
        n += update;
    }
    CHECK(n == 10);
}

static musa_tensor *scalar64(double v) {
    return musa_full(0, NULL, v, MUSA_DTYPE_FLOAT64);
}

/* Rows of different sizes: 1 element, empty, 2-d, above the kernels' grain
 * (16,384), 0-d, and a few more. */
static const int64_t SIZES[][2] = {{1, 1}, {0, 4}, {3, 5}, {200, 200}, {-1, 0}, {7, 3}};
#define N_ROWS ((int)(sizeof SIZES / sizeof SIZES[0]))

static musa_tensor *sized(musa_dtype dt, int r, double lo, double hi) {
    if (SIZES[r][0] < 0) return rnd(dt, 0, NULL, lo, hi, L_CONTIG);
    return rnd(dt, 2, SIZES[r], lo, hi, L_CONTIG);
}

/* Whether a and b hold the same bytes (both contiguous, same dtype and shape). */
static bool same_bytes(const musa_tensor *a, const musa_tensor *b) {
    size_t n = (size_t)musa_tensor_numel(a) * musa_dtype_size(musa_tensor_dtype(a));
    return musa_tensor_numel(a) == musa_tensor_numel(b) &&
           (n == 0 || !memcmp(musa_tensor_data(a), musa_tensor_data(b), n));
}

/* An update's rows twice over (two copies of the same values, one lr shared
 * by every row as musa.optim shares it): n_rows rows of n_in tensors. */
typedef struct rows {
    int n_in;
    musa_tensor *a[N_ROWS * 8], *b[N_ROWS * 8];
    musa_tensor *lr;
} rows;

/* Param, n_out - 1 state tensors (the last n_scal of them 0-d float64
 * scalars: 1 for most, the step counter 3 ), a gradient slot (filled per
 * step), lr. */
static void rows_init(rows *s, musa_dtype dt, int n_out, int n_scal) {
    s->n_in = n_out + 2;
    s->lr = scalar64(0.01);
    for (int r = 0; r < N_ROWS; r++) {
        musa_tensor **ra = s->a + r * s->n_in, **rb = s->b + r * s->n_in;
        for (int i = 0; i < n_out; i++) {
            /* parameter in [-1, 1); state in [0.3, 0.5), so every square root
             * (centered RMSprop's included) has a positive argument */
            ra[i] = i >= n_out - n_scal ? scalar64(i == n_out - 1 ? 3 : 1)
                                        : sized(dt, r, i ? 0.3 : -1, i ? 0.5 : 1);
            rb[i] = musa_clone(ra[i]);
        }
        ra[n_out + 1] = rb[n_out + 1] = s->lr;
    }
}

static void rows_free(rows *s) {
    for (int k = 0; k < N_ROWS * s->n_in; k++) {
        if (k % s->n_in >= s->n_in - 2) continue; /* grad and lr: below */
        musa_tensor_release(s->a[k]);
        musa_tensor_release(s->b[k]);
    }
    musa_tensor_release(s->lr);
}

/* Two steps: a row by row (musa_op_call, in place), b in one
 * musa_update_multi; every tensor equal byte for byte, versions equal. */
static void multi_case(const char *opname, int n_out, int n_scal, musa_dtype dt, int n_set,
                       const char *const *keys, const double *vals) {
    int op = musa_op_lookup(opname);
    musa_attrs *at = musa_attrs_new(op);
    for (int k = 0; k < n_set; k++) CHECK_OK(musa_attrs_set_number(at, keys[k], vals[k]));
    rows s;
    rows_init(&s, dt, n_out, n_scal);
    for (int step = 0; step < 2; step++) {
        for (int r = 0; r < N_ROWS; r++) {
            musa_tensor *g = sized(dt, r, -1, 1);
            s.a[r * s.n_in + n_out] = s.b[r * s.n_in + n_out] = g;
        }
        for (int r = 0; r < N_ROWS; r++) {
            musa_tensor *outs[6] = {NULL};
            for (int j = 0; j < n_out; j++) outs[j] = s.a[r * s.n_in + j];
            CHECK_MSG(musa_op_call(op, s.n_in, s.a + r * s.n_in, at, outs) == MUSA_OK, "%s",
                      musa_last_error());
        }
        CHECK_MSG(musa_update_multi(op, at, N_ROWS, s.n_in, s.b) == MUSA_OK, "%s",
                  musa_last_error());
        for (int k = 0; k < N_ROWS * s.n_in; k++) {
            CHECK_MSG(same_bytes(s.a[k], s.b[k]), "%s %s: row %d tensor %d differs at step %d",
                      opname, musa_dtype_name(dt), k / s.n_in, k % s.n_in, step);
            CHECK_MSG(musa_tensor_version(s.a[k]) == musa_tensor_version(s.b[k]),
                      "%s: row %d tensor %d has version %llu, row by row %llu", opname, k / s.n_in,
                      k % s.n_in, (unsigned long long)musa_tensor_version(s.b[k]),
                      (unsigned long long)musa_tensor_version(s.a[k]));
        }
        for (int r = 0; r < N_ROWS; r++) musa_tensor_release(s.a[r * s.n_in + n_out]);
    }
    if (n_scal) {
        double st = 0;
        CHECK_OK(musa_tensor_item(s.b[n_out - 1], &st));
        CHECK_NEAR(st, 5, 0);
    }
    rows_free(&s);
    musa_attrs_free(at);
}

#define KEYS(...)                                                                                  \
    (const char *const[]) {                                                                        \
        __VA_ARGS__                                                                                \
    }
#define VALS(...)                                                                                  \
    (const double[]) {                                                                             \
        __VA_ARGS__                                                                                \
    }

static void every_case(musa_dtype dt) {
    multi_case("sgd_update", 1, 0, dt, 0, NULL, NULL);
    multi_case("sgd_update", 1, 0, dt, 2, KEYS("weight_decay", "maximize"), VALS(0.1, 1));
    multi_case("sgd_update", 2, 0, dt, 2, KEYS("momentum", "weight_decay"), VALS(0.9, 0.01));
    multi_case("sgd_update", 2, 0, dt, 2, KEYS("momentum", "nesterov"), VALS(0.9, 1));
    multi_case("sgd_update", 2, 0, dt, 3, KEYS("momentum", "dampening", "fresh"),
               VALS(0.9, 0.5, 1));
    multi_case("adam_update", 4, 1, dt, 0, NULL, NULL);
    multi_case("adam_update", 5, 1, dt, 1, KEYS("amsgrad"), VALS(1));
    multi_case("adam_update", 4, 1, dt, 2, KEYS("decoupled", "weight_decay"), VALS(1, 0.1));
    multi_case("adam_update", 5, 1, dt, 3, KEYS("amsgrad", "maximize", "weight_decay"),
               VALS(1, 1, 0.1));
    multi_case("rmsprop_update", 3, 1, dt, 0, NULL, NULL);
    multi_case("rmsprop_update", 4, 1, dt, 1, KEYS("centered"), VALS(1));
    multi_case("rmsprop_update", 4, 1, dt, 1, KEYS("momentum"), VALS(0.5));
    multi_case("rmsprop_update", 5, 1, dt, 3, KEYS("centered", "momentum", "weight_decay"),
               VALS(1, 0.5, 0.1));
    multi_case("adagrad_update", 3, 1, dt, 0, NULL, NULL);
    multi_case("adagrad_update", 3, 1, dt, 3, KEYS("lr_decay", "weight_decay", "maximize"),
               VALS(0.1, 0.1, 1));
    multi_case("adadelta_update", 4, 1, dt, 0, NULL, NULL);
    multi_case("adadelta_update", 4, 1, dt, 2, KEYS("weight_decay", "rho"), VALS(0.1, 0.5));
    multi_case("adamax_update", 4, 1, dt, 0, NULL, NULL);
    multi_case("adamax_update", 4, 1, dt, 2, KEYS("weight_decay", "maximize"), VALS(0.1, 1));
    multi_case("nadam_update", 5, 2, dt, 0, NULL, NULL);
    multi_case("nadam_update", 5, 2, dt, 2, KEYS("weight_decay", "decoupled"), VALS(0.1, 1));
    multi_case("radam_update", 4, 1, dt, 0, NULL, NULL);
    multi_case("radam_update", 4, 1, dt, 1, KEYS("weight_decay"), VALS(0.1));
    multi_case("asgd_update", 5, 3, dt, 0, NULL, NULL);
    multi_case("asgd_update", 5, 3, dt, 2, KEYS("weight_decay", "t0"), VALS(0.1, 2));
    multi_case("rprop_update", 4, 1, dt, 0, NULL, NULL);
    multi_case("rprop_update", 4, 1, dt, 3, KEYS("etaplus", "step_size_max", "maximize"),
               VALS(1.5, 0.5, 1));
}

TEST(update_multi_is_bitwise_row_by_row) {
    int threads = musa_get_num_threads();
    for (int t = 1; t <= 3 && !harness_failed(); t += 2) { /* 3: chunks split rows */
        musa_set_num_threads(t);
        every_case(MUSA_DTYPE_FLOAT32);
        if (!harness_failed()) every_case(MUSA_DTYPE_FLOAT64);
    }
    musa_set_num_threads(threads);
}

/* Rows the dispatcher runs through a copy (a strided parameter, an lr to
 * cast) or that share a tensor with another row (the same parameter twice:
 * updated twice, in order) give the results of row by row too. */
TEST(update_multi_rows_not_in_place_run_as_row_by_row) {
    int op = musa_op_lookup("sgd_update");
    musa_attrs *at = musa_attrs_new(op);
    CHECK_OK(musa_attrs_set_number(at, "momentum", 0.9));
    const int64_t s[] = {6, 4};
    musa_tensor *lr = scalar64(0.1), *lr32 = musa_full(0, NULL, 0.1, MUSA_DTYPE_FLOAT32);
    musa_tensor *p[5], *q[5], *buf[5], *bq[5], *g[5];
    for (int r = 0; r < 5; r++) {
        p[r] = rnd(MUSA_DTYPE_FLOAT32, 2, s, -1, 1, r == 1 ? L_TRANSPOSED : L_CONTIG);
        buf[r] = rnd(MUSA_DTYPE_FLOAT32, 2, s, -1, 1, L_CONTIG);
        g[r] = rnd(MUSA_DTYPE_FLOAT32, 2, s, -1, 1, L_CONTIG);
        bq[r] = musa_clone(buf[r]);
        q[r] = musa_clone(p[r]);
    }
    /* q[1]: p[1]'s values in p[1]'s transposed layout */
    musa_tensor *pt = musa_transpose(p[1], 0, 1), *base = musa_contiguous(pt);
    musa_tensor_release(q[1]);
    q[1] = musa_transpose(base, 0, 1);
    CHECK(q[1] && !musa_tensor_is_contiguous(q[1]));
    /* rows: plain, strided, lr float32, plain, and row 0's tensors again */
    musa_tensor *a[20] = {p[0], buf[0], g[0], lr,     p[1], buf[1], g[1], lr,     p[2], buf[2],
                          g[2], lr32,   p[3], buf[3], g[3], lr,     p[0], buf[0], g[4], lr};
    musa_tensor *b[20] = {q[0], bq[0], g[0], lr,    q[1], bq[1], g[1], lr,    q[2], bq[2],
                          g[2], lr32,  q[3], bq[3], g[3], lr,    q[0], bq[0], g[4], lr};
    for (int n_rows = 5; n_rows >= 4; n_rows--) {
        /* 5 rows: the shared one makes every row run in order; 4 rows: rows
         * 0 and 3 run together, 1 and 2 on their own */
        for (int r = 0; r < n_rows; r++) {
            musa_tensor *outs[6] = {a[r * 4], a[r * 4 + 1]};
            CHECK_OK(musa_op_call(op, 4, a + r * 4, at, outs));
        }
        CHECK_OK(musa_update_multi(op, at, n_rows, 4, b));
        for (int r = 0; r < 4; r++) {
            musa_tensor *x = musa_contiguous(p[r]), *y = musa_contiguous(q[r]);
            bool same = same_bytes(x, y) && same_bytes(buf[r], bq[r]);
            release_all(2, x, y);
            CHECK_MSG(same, "%d rows: row %d differs", n_rows, r);
            CHECK(musa_tensor_version(q[r]) == musa_tensor_version(p[r]));
        }
    }
    musa_attrs_free(at);
    for (int r = 0; r < 5; r++) release_all(5, p[r], q[r], buf[r], bq[r], g[r]);
    release_all(4, lr, lr32, pt, base);
}

/* Kernel calls of `op` the profiler saw in its last session. */
static int kernel_calls(musa_op_id op) {
    int calls = 0;
    musa_profile_event e;
    for (int64_t i = 0; i < musa_profiler_num_events(); i++)
        if (!musa_profiler_get_event(i, &e) && e.kind == MUSA_PROFILE_OP &&
            !strcmp(e.name, musa_op_name(op)))
            calls++;
    return calls;
}

/* Parameters and buffers as slices [start, end) of one storage each, lr
 * shared; row 1's gradient is ones, or with g1_at >= 0 the slice of the
 * parameters' storage from g1_at. One step row by row on a copy and one in
 * one call: returns the kernel calls of the one call (1: the rows ran
 * together), -1 when the results differ. */
static int slices_case(int n_rows, const int64_t (*range)[2], int64_t g1_at) {
    int op = musa_op_lookup("sgd_update");
    musa_attrs *at = musa_attrs_new(op);
    musa_attrs_set_number(at, "momentum", 0.9);
    const int64_t n = 100;
    musa_tensor *flat[2][2], *lr = scalar64(0.1), *t[2][16] = {{NULL}};
    for (int k = 0; k < 2; k++) {
        flat[0][k] = rnd(MUSA_DTYPE_FLOAT32, 1, &n, -1, 1, L_CONTIG);
        flat[1][k] = musa_clone(flat[0][k]);
    }
    for (int c = 0; c < 2; c++)
        for (int r = 0; r < n_rows; r++) {
            int64_t w = range[r][1] - range[r][0];
            t[c][r * 4] = musa_slice(flat[c][0], 0, range[r][0], range[r][1], 1);
            t[c][r * 4 + 1] = musa_slice(flat[c][1], 0, range[r][0], range[r][1], 1);
            t[c][r * 4 + 2] = r == 1 && g1_at >= 0 ? musa_slice(flat[c][0], 0, g1_at, g1_at + w, 1)
                                                   : musa_ones(1, &w, MUSA_DTYPE_FLOAT32);
            t[c][r * 4 + 3] = musa_tensor_retain(lr);
        }
    for (int r = 0; r < n_rows; r++) {
        musa_tensor *outs[6] = {t[0][r * 4], t[0][r * 4 + 1]};
        musa_op_call(op, 4, t[0] + r * 4, at, outs);
    }
    musa_profiler_start(0);
    int rc = musa_update_multi(op, at, n_rows, 4, t[1]);
    musa_profiler_stop();
    int calls = rc ? -1 : kernel_calls(op);
    for (int k = 0; k < 2; k++)
        if (!same_bytes(flat[0][k], flat[1][k])) calls = -1;
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 16; k++) musa_tensor_release(t[c][k]);
    for (int k = 0; k < 2; k++) musa_tensor_release(flat[0][k]), musa_tensor_release(flat[1][k]);
    musa_tensor_release(lr);
    musa_attrs_free(at);
    return calls;
}

/* Rows run as one kernel call unless one writes memory another row reads
 * or writes: slices of one storage that do not overlap run together; ones
 * that overlap, or a row reading another's parameter, run one by one. */
TEST(update_multi_runs_rows_together_unless_they_share_memory) {
    const int64_t apart[3][2] = {{0, 30}, {30, 31}, {40, 100}};
    const int64_t overlap[3][2] = {{0, 30}, {29, 60}, {60, 100}};
    const int64_t same[2][2] = {{10, 20}, {10, 20}};
    CHECK(slices_case(3, apart, -1) == 1);
    CHECK(slices_case(3, overlap, -1) == 3);
    CHECK(slices_case(2, same, -1) == 2);
    /* row 1's gradient in the parameters' storage: where row 0 writes, and
     * between the rows' parameters (read only) */
    CHECK(slices_case(3, apart, 0) == 3);
    CHECK(slices_case(3, apart, 35) == 1);
}

/* An invalid row anywhere fails the call naming the op and the row, with
 * the row's own error, and nothing is written; so do the call's arguments. */
TEST(update_multi_errors_name_the_row_and_write_nothing) {
    int op = musa_op_lookup("adam_update");
    musa_attrs *at = musa_attrs_new(op);
    const int64_t s[] = {5}, s4[] = {4};
    musa_tensor *lr = scalar64(0.1), *t[5][6];
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 3; i++) t[r][i] = rnd(MUSA_DTYPE_FLOAT32, 1, s, 0.1, 1, L_CONTIG);
        t[r][3] = scalar64(0);
        t[r][4] = rnd(MUSA_DTYPE_FLOAT32, 1, s, -1, 1, L_CONTIG);
        t[r][5] = lr;
    }
    musa_tensor *bad = rnd(MUSA_DTYPE_FLOAT32, 1, s4, -1, 1, L_CONTIG);
    musa_tensor *flat[30];
    double *before[5];
    uint64_t ver[5];
    for (int r = 0; r < 5; r++) {
        for (int i = 0; i < 6; i++) flat[r * 6 + i] = t[r][i];
        before[r] = values(t[r][0]);
        ver[r] = musa_tensor_version(t[r][0]);
    }
    flat[2 * 6 + 4] = bad; /* row 2's gradient */
    CHECK_ERR(musa_update_multi(op, at, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] row 2: gradient (input 4) has shape (4,) but the parameter has (5,)");
    flat[2 * 6 + 4] = t[2][4];
    flat[3 * 6 + 2] = NULL; /* row 3's exp_avg_sq */
    CHECK_ERR(musa_update_multi(op, at, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] row 3: input 2 is NULL");
    flat[3 * 6 + 2] = t[3][2];
    flat[4 * 6 + 3] = t[4][0]; /* a float32 step counter */
    CHECK_ERR(musa_update_multi(op, at, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] row 4: step (input 3) must be a 0-d float64 tensor, got float32 (5,)");
    flat[4 * 6 + 3] = t[4][3];
    musa_tensor *one = musa_full(1, (int64_t[]){1}, 1.0, MUSA_DTYPE_FLOAT32);
    musa_tensor *e = musa_expand(one, 1, s);
    flat[1 * 6 + 1] = e; /* an expanded exp_avg cannot be written */
    CHECK_ERR(musa_update_multi(op, at, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] row 1: cannot write into a tensor whose elements overlap");
    flat[1 * 6 + 1] = t[1][1];
    CHECK_OK(musa_attrs_set_number(at, "amsgrad", 1));
    CHECK_ERR(musa_update_multi(op, at, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] row 0: takes 7 inputs with these options");
    CHECK_OK(musa_attrs_set_number(at, "amsgrad", 0));
    CHECK_OK(musa_attrs_set_number(at, "beta1", 1));
    CHECK_ERR(musa_update_multi(op, at, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] row 0: invalid beta1: 1");
    for (int r = 0; r < 5; r++) {
        double *now = values(t[r][0]), st = -1;
        bool same = !memcmp(now, before[r], sizeof(double) * 5);
        free(now);
        CHECK_OK(musa_tensor_item(t[r][3], &st));
        CHECK_MSG(same && st == 0 && musa_tensor_version(t[r][0]) == ver[r],
                  "row %d was written by a failed call", r);
    }
    /* the call's own arguments */
    musa_attrs *sgd = musa_attrs_new(musa_op_lookup("sgd_update"));
    CHECK_ERR(musa_update_multi(musa_op_lookup("add"), NULL, 1, 3, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[update_multi] add is not an update op");
    CHECK_ERR(musa_update_multi(op, sgd, 5, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[update_multi] attrs were made for op sgd_update, not adam_update");
    CHECK_ERR(musa_update_multi(op, NULL, 1, 9, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[adam_update] an update row has 3 to 8 tensors, got 9");
    CHECK_ERR(musa_update_multi(op, NULL, -1, 6, flat) == MUSA_OK, MUSA_ERR_VALUE,
              "[update_multi] bad row array");
    CHECK_OK(musa_update_multi(op, NULL, 0, 6, NULL)); /* no rows: nothing to do */
    musa_attrs_free(sgd);
    musa_attrs_free(at);
    for (int r = 0; r < 5; r++) {
        free(before[r]);
        for (int i = 0; i < 5; i++) musa_tensor_release(t[r][i]);
    }
    release_all(4, lr, bad, one, e);
}
