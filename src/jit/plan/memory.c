/*
 * plan/memory.c - where the plan's arena buffers and the steps' scratch go
 * in the arena: best fit by size and lifetime, in the best of a few orders.
 *
 * A buffer lives over steps [first, last] (first <= last). Two buffers may
 * share bytes only when their lifetimes are disjoint. Each query here asks
 * for the buffers whose lifetimes overlap an interval; a `lifetimes` index
 * answers it in time proportional to the answer (plus a logarithm), so
 * placing B buffers costs O(B log B + P log P), P the pairs of buffers
 * whose lifetimes overlap, instead of a scan of every buffer per buffer.
 *
 * Invariants: each greedy placement gives the results of the plain
 * quadratic scans it replaces, bit for bit: buffers are placed in the
 * order's sequence (ties: earlier first step, then qsort's order), and
 * gaps are searched over the overlapping buffers by offset, ties in
 * placement order (scratch: buffer order). Several orders are tried and
 * the smallest arena kept.
 */
#include "internal.h"

/* ---- lifetimes: buffers indexed by the steps they live over ---- */

/* A segment tree over steps [0, size) in which a buffer sits in the
 * O(log size) nodes covering its lifetime exactly: the buffers live at step
 * s are those listed on the path from s's leaf to the root, each once.
 * Buffers are also listed by first step, with a bit per step that has any. */
typedef struct lifetimes {
    int size;            /* leaves: a power of two above every step */
    int32_t *head;       /* [2 * size] each node's first entry, -1: none */
    int32_t *buf, *next; /* [cap] entries: a buffer, the node's next entry */
    int n, cap;
    int32_t *first_head; /* [size] buffers by first step: first one, -1: none */
    int32_t *first_next; /* [buffers] the next with the same first step */
    uint64_t *has_first; /* [size / 64 + 1] a bit per step with such a buffer */
} lifetimes;

static void lifetimes_free(lifetimes *t) {
    free(t->head), free(t->buf), free(t->next);
    free(t->first_head), free(t->first_next), free(t->has_first);
}

/* An empty index for steps [0, max_step] and n_bufs buffer ids. Returns
 * false (nothing allocated) when short of memory. */
static bool lifetimes_init(lifetimes *t, int max_step, int n_bufs) {
    memset(t, 0, sizeof *t);
    t->size = 1;
    while (t->size <= max_step) t->size *= 2;
    t->cap = 4 * (n_bufs ? n_bufs : 1);
    t->head = malloc(sizeof *t->head * 2 * (size_t)t->size);
    t->buf = malloc(sizeof *t->buf * (size_t)t->cap);
    t->next = malloc(sizeof *t->next * (size_t)t->cap);
    t->first_head = malloc(sizeof *t->first_head * (size_t)t->size);
    t->first_next = malloc(sizeof *t->first_next * (size_t)(n_bufs ? n_bufs : 1));
    t->has_first = calloc((size_t)t->size / 64 + 1, sizeof *t->has_first);
    if (!t->head || !t->buf || !t->next || !t->first_head || !t->first_next || !t->has_first) {
        lifetimes_free(t);
        return false;
    }
    for (int i = 0; i < 2 * t->size; i++) t->head[i] = -1;
    for (int i = 0; i < t->size; i++) t->first_head[i] = -1;
    return true;
}

static bool lifetimes_push(lifetimes *t, int node, int32_t id) {
    if (t->n == t->cap) {
        int cap = t->cap * 2;
        int32_t *buf = realloc(t->buf, sizeof *buf * (size_t)cap);
        if (buf) t->buf = buf;
        int32_t *next = buf ? realloc(t->next, sizeof *next * (size_t)cap) : NULL;
        if (!next) return false;
        t->next = next, t->cap = cap;
    }
    t->buf[t->n] = id, t->next[t->n] = t->head[node], t->head[node] = t->n++;
    return true;
}

/* Add buffer id, living over [first, last]. False when short of memory. */
static bool lifetimes_add(lifetimes *t, int32_t id, int first, int last) {
    for (int l = first + t->size, r = last + t->size + 1; l < r; l /= 2, r /= 2) {
        if ((l & 1) && !lifetimes_push(t, l++, id)) return false;
        if ((r & 1) && !lifetimes_push(t, --r, id)) return false;
    }
    t->first_next[id] = t->first_head[first];
    t->first_head[first] = id;
    t->has_first[first / 64] |= 1ull << (first % 64);
    return true;
}

/* The buffers live at step s, appended to out; returns the new count. */
static int lifetimes_live_at(const lifetimes *t, int s, int32_t *out, int n) {
    for (int node = s + t->size; node >= 1; node /= 2)
        for (int e = t->head[node]; e >= 0; e = t->next[e]) out[n++] = t->buf[e];
    return n;
}

/* The buffers whose first step is in (a, b], appended to out. */
static int lifetimes_first_in(const lifetimes *t, int a, int b, int32_t *out, int n) {
    for (int s = a + 1; s <= b; s++) {
        uint64_t word = t->has_first[s / 64] >> (s % 64);
        if (!word) { /* no buffer starts in the rest of this word */
            s |= 63;
            continue;
        }
        s += __builtin_ctzll(word);
        if (s > b) break;
        for (int id = t->first_head[s]; id >= 0; id = t->first_next[id]) out[n++] = id;
    }
    return n;
}

/* ---- best fit ---- */

/* Ordering of candidate neighbours: by offset, ties by id (placement or
 * buffer order, as the insertion sorts this replaces kept them). */
typedef struct by_offset {
    size_t offset;
    int32_t id;
} by_offset;

static int cmp_by_offset(const void *a, const void *b) {
    const by_offset *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The lowest offset of the smallest gap of at least `need` bytes between
 * the buffers nb[0..m) (sorted by offset), or the end of the last of them. */
static size_t best_gap(const by_offset *nb, int m, const musa_plan_buffer *bufs, size_t need) {
    size_t best = SIZE_MAX, best_size = SIZE_MAX, cur = 0;
    for (int a = 0; a < m; a++) {
        const musa_plan_buffer *y = &bufs[nb[a].id];
        if (y->offset >= cur && y->offset - cur >= need && y->offset - cur < best_size)
            best = cur, best_size = y->offset - cur;
        size_t end = musa_sat_add_size(y->offset, musa_plan_align(y->bytes));
        if (end > cur) cur = end;
    }
    return best != SIZE_MAX ? best : cur;
}

/* Placement orders tried (each a comparison of buffers; ties: earlier
 * first step, then qsort's order, which is deterministic):
 * - SIZE: largest first, the classic greedy;
 * - AREA: bytes x steps first (a large, long-lived buffer pins an offset
 *   for longest, so it goes low);
 * - SPAN: longest-lived first, then largest;
 * - PEAK: the buffers live at the live peak's (first) step first, in the
 *   order they were made (each stacked on those made before it, so the
 *   peak's set packs without holes: GPT-tiny's step, whose other orders
 *   left it 3.7% above its live peak, 6.92 against 6.67 MiB), then the
 *   rest largest first.
 * Greedy placement leaves gaps that depend on the order: the arena is the
 * smallest the orders give (ties keep the earlier order; an order that
 * reaches the live peak, which no arena can be below, ends the search).
 * Measured on the zoo's compiled steps, largest first alone left 1.0-13.7%
 * above the live peak on four of twelve (docs/benchmarks.md). */
enum { ORDER_SIZE, ORDER_AREA, ORDER_SPAN, ORDER_PEAK, N_ORDERS };

static double area(const musa_plan_buffer *x) {
    return (double)x->bytes * (double)(x->last - x->first + 1);
}

static int cmp_tail(const musa_plan_buffer *x, const musa_plan_buffer *y) {
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->first - y->first;
}

static int cmp_size(const void *a, const void *b) {
    return cmp_tail(a, b);
}

static int cmp_area(const void *a, const void *b) {
    double x = area(a), y = area(b);
    if (x != y) return x < y ? 1 : -1;
    return cmp_tail(a, b);
}

static int cmp_span(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    int sx = x->last - x->first, sy = y->last - y->first;
    if (sx != sy) return sx < sy ? 1 : -1;
    return cmp_tail(x, y);
}

/* (value: 1 for the buffers live at the peak step, set by place) */
static int cmp_peak(const void *a, const void *b) {
    const musa_plan_buffer *x = a, *y = b;
    if (x->value != y->value) return y->value - x->value;
    if (x->value && x->first != y->first) return x->first - y->first;
    return cmp_tail(x, y);
}

static int (*const order_cmp[N_ORDERS])(const void *, const void *) = {cmp_size, cmp_area, cmp_span,
                                                                       cmp_peak};

static size_t one_after_another(musa_plan_buffer *bufs, int n) {
    size_t total = 0;
    for (int i = 0; i < n; i++)
        bufs[i].offset = total, total = musa_sat_add_size(total, musa_plan_align(bufs[i].bytes));
    return total;
}

/* Scratch for one greedy placement of n buffers. */
typedef struct placer {
    musa_plan_buffer *sorted;
    int32_t *index; /* sorted position -> buffer */
    int32_t *hits;
    by_offset *nb;
    int max_step;
    int peak_step; /* a step where the most bytes are live */
} placer;

/* Greedy placement of bufs in order `order`: each buffer takes the smallest
 * gap between the buffers already placed whose lifetimes overlap its own.
 * Offsets into off[buffer]; returns the arena's bytes, or SIZE_MAX when
 * short of memory. */
static size_t place(placer *P, const musa_plan_buffer *bufs, int n, int order, size_t *off) {
    lifetimes placed; /* by sorted position */
    if (!lifetimes_init(&placed, P->max_step, n)) return SIZE_MAX;
    musa_plan_buffer *sorted = P->sorted;
    /* The sort compares bytes and steps only: offset carries each buffer's
     * index through it. */
    memcpy(sorted, bufs, sizeof *sorted * (size_t)n);
    for (int i = 0; i < n; i++) sorted[i].offset = (size_t)i;
    if (order == ORDER_PEAK) /* value is the sort's key there: live at the peak step */
        for (int i = 0; i < n; i++)
            sorted[i].value = sorted[i].first <= P->peak_step && P->peak_step <= sorted[i].last;
    qsort(sorted, (size_t)n, sizeof *sorted, order_cmp[order]);
    for (int i = 0; i < n; i++) P->index[i] = (int32_t)sorted[i].offset, sorted[i].offset = 0;
    size_t total = 0;
    bool ok = true;
    for (int i = 0; ok && i < n; i++) {
        musa_plan_buffer *x = &sorted[i];
        size_t need = musa_plan_align(x->bytes);
        /* the placed buffers overlapping x: live at its first step, or
         * starting later within its lifetime */
        int m = lifetimes_live_at(&placed, x->first, P->hits, 0);
        m = lifetimes_first_in(&placed, x->first, x->last, P->hits, m);
        for (int a = 0; a < m; a++) P->nb[a] = (by_offset){sorted[P->hits[a]].offset, P->hits[a]};
        qsort(P->nb, (size_t)m, sizeof *P->nb, cmp_by_offset);
        x->offset = best_gap(P->nb, m, sorted, need);
        if (musa_sat_add_size(x->offset, need) > total) total = musa_sat_add_size(x->offset, need);
        ok = lifetimes_add(&placed, i, x->first, x->last);
    }
    lifetimes_free(&placed);
    if (!ok) return SIZE_MAX;
    for (int i = 0; i < n; i++) off[P->index[i]] = sorted[i].offset;
    return total;
}

/* The most bytes live at once (aligned as placed): no arena is smaller, so
 * an order that reaches it ends the search. 0 (no floor) when short of
 * memory. */
static size_t live_peak(const musa_plan_buffer *bufs, int n, int max_step, int *peak_step) {
    size_t *delta = calloc((size_t)max_step + 2, sizeof *delta), peak = 0, live = 0;
    size_t *gone = calloc((size_t)max_step + 2, sizeof *gone);
    bool ok = delta && gone;
    if (ok) {
        for (int i = 0; i < n; i++) {
            size_t b = musa_plan_align(bufs[i].bytes);
            delta[bufs[i].first] = musa_sat_add_size(delta[bufs[i].first], b);
            gone[bufs[i].last + 1] = musa_sat_add_size(gone[bufs[i].last + 1], b);
        }
        for (int s = 0; s <= max_step; s++) {
            live = musa_sat_add_size(live - gone[s], delta[s]);
            if (live > peak) peak = live, *peak_step = s;
        }
    }
    free(delta), free(gone);
    return ok ? peak : 0;
}

size_t musa_plan_assign_offsets(musa_plan_buffer *bufs, int n, bool reuse, bool peak_order,
                                bool *peak_won) {
    if (!reuse) return one_after_another(bufs, n);
    size_t cnt = (size_t)(n ? n : 1);
    placer P = {.sorted = malloc(sizeof *P.sorted * cnt),
                .index = malloc(sizeof *P.index * cnt),
                .hits = malloc(sizeof *P.hits * cnt),
                .nb = malloc(sizeof *P.nb * cnt)};
    size_t *off = malloc(sizeof *off * cnt), *best_off = malloc(sizeof *best_off * cnt);
    size_t best = SIZE_MAX;
    if (P.sorted && P.index && P.hits && P.nb && off && best_off) {
        for (int i = 0; i < n; i++) P.max_step = MUSA_MAX(P.max_step, bufs[i].last);
        size_t floor = live_peak(bufs, n, P.max_step, &P.peak_step);
        for (int order = 0; order < (peak_order ? N_ORDERS : ORDER_PEAK) && best > floor; order++) {
            size_t total = place(&P, bufs, n, order, off);
            if (total < best) {
                best = total;
                if (peak_won) *peak_won = order == ORDER_PEAK;
                size_t *t = best_off;
                best_off = off, off = t;
            }
        }
    }
    if (best != SIZE_MAX)
        for (int i = 0; i < n; i++) bufs[i].offset = best_off[i];
    free(P.sorted), free(P.index), free(P.hits), free(P.nb), free(off), free(best_off);
    return best != SIZE_MAX ? best : one_after_another(bufs, n);
}

void musa_plan_place_scratch(const musa_plan_buffer *bufs, int n_bufs, int n_steps,
                             const size_t *bytes, size_t *off, size_t *arena_bytes) {
    int max_step = n_steps;
    for (int k = 0; k < n_bufs; k++) max_step = MUSA_MAX(max_step, bufs[k].last);
    size_t cnt = (size_t)(n_bufs ? n_bufs : 1);
    int32_t *hits = malloc(sizeof *hits * cnt);
    by_offset *nb = malloc(sizeof *nb * cnt);
    lifetimes live;
    bool indexed = hits && nb && lifetimes_init(&live, max_step, n_bufs);
    bool ok = indexed;
    for (int k = 0; ok && k < n_bufs; k++)
        ok = lifetimes_add(&live, k, bufs[k].first, bufs[k].last);
    for (int s = 0; s < n_steps; s++) {
        off[s] = 0;
        if (!bytes[s]) continue;
        size_t need = musa_plan_align(bytes[s]);
        if (!ok) { /* no room to look: at the end */
            off[s] = musa_plan_align(*arena_bytes);
            *arena_bytes = musa_sat_add_size(off[s], need);
            continue;
        }
        int m = lifetimes_live_at(&live, s, hits, 0);
        for (int a = 0; a < m; a++) nb[a] = (by_offset){bufs[hits[a]].offset, hits[a]};
        qsort(nb, (size_t)m, sizeof *nb, cmp_by_offset);
        off[s] = best_gap(nb, m, bufs, need);
        if (musa_sat_add_size(off[s], need) > *arena_bytes)
            *arena_bytes = musa_sat_add_size(off[s], need);
    }
    if (indexed) lifetimes_free(&live);
    free(hits), free(nb);
}
