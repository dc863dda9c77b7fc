/*
 * digits.h - load data/digits.csv.gz (1,797 8x8 handwritten digits; see
 * data/README.md) for the examples and tests. Decompresses with the system
 * gzip through a pipe, so the library itself needs no zlib.
 *
 * Usage: digits_data d; if (digits_load("data/digits.csv.gz", &d)) ...;
 *        d.x: n x 64 floats scaled to [0, 1]; d.y: n int64 labels.
 */
#ifndef MUSA_EXAMPLES_DIGITS_H
#define MUSA_EXAMPLES_DIGITS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define DIGITS_FEATURES 64
#define DIGITS_MAX      2000

typedef struct {
    int n;
    float x[DIGITS_MAX][DIGITS_FEATURES];
    int64_t y[DIGITS_MAX];
} digits_data;

/* Returns 0 on success, -1 (with a message on stderr) on failure. */
static inline int digits_load(const char *path, digits_data *d) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "gzip -dc '%s'", path);
    FILE *f = popen(cmd, "r");
    if (!f) {
        fprintf(stderr, "cannot run gzip on %s\n", path);
        return -1;
    }
    d->n = 0;
    for (;;) {
        int v[DIGITS_FEATURES + 1], k;
        for (k = 0; k <= DIGITS_FEATURES; k++)
            if (fscanf(f, k ? ",%d" : "%d", &v[k]) != 1) break;
        if (k <= DIGITS_FEATURES) break;
        if (d->n == DIGITS_MAX) break;
        for (int j = 0; j < DIGITS_FEATURES; j++) d->x[d->n][j] = (float)v[j] / 16.0f;
        d->y[d->n] = v[DIGITS_FEATURES];
        d->n++;
    }
    int rc = pclose(f);
    if (d->n < 100 || rc != 0) {
        fprintf(stderr, "could not read %s (%d rows)\n", path, d->n);
        return -1;
    }
    return 0;
}

/* Deterministic shuffle of sample order (xorshift), for train/test splits. */
static inline void digits_shuffle(digits_data *d, uint64_t seed) {
    for (int i = d->n - 1; i > 0; i--) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        int j = (int)(seed % (uint64_t)(i + 1));
        for (int k = 0; k < DIGITS_FEATURES; k++) {
            float t = d->x[i][k];
            d->x[i][k] = d->x[j][k];
            d->x[j][k] = t;
        }
        int64_t t = d->y[i];
        d->y[i] = d->y[j];
        d->y[j] = t;
    }
}

#endif
