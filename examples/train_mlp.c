/*
 * train_mlp.c - train a 2-layer MLP on the handwritten digits with the musa
 * C API and its autograd (no Python): forward with ops, a cross-entropy
 * built from primitives, musa_backward, and an SGD step under no-grad.
 *
 * Run from the repository root: ./build/train_mlp [epochs]
 */
#include <stdlib.h>

#include "mlp_train.h"

int main(int argc, char **argv) {
    static digits_data d;
    if (digits_load("data/digits.csv.gz", &d)) return 1;
    int epochs = argc > 1 ? atoi(argv[1]) : 20;
    mlp_result r;
    printf("2-layer MLP (64-64-10) on %d digits, C API + autograd\n", d.n);
    if (mlp_train(&d, epochs, 1, &r)) return 1;
    printf("held-out accuracy: %.1f%%\n", 100 * r.test_accuracy);
    return 0;
}
