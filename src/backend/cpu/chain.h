/*
 * chain.h - a float32 elementwise group run in registers: the plan's fused
 * chains (src/jit/plan/lower.c builds the program, run.c runs it).
 *
 * A lean fused group (docs/jit.md) calls each member's loop on an L1 tile:
 * every member stores its tile and the next loads it back, so the gelu-tanh
 * chain of 8 members costs 9 passes of stores per element. A chain runs the
 * same members on blocks of MUSA_CHAIN_N elements held in vector registers
 * (an accumulator of MUSA_CHAIN_N floats): a member that reads the previous
 * one's result takes it from the accumulator, values read again later are
 * spilled to a block on the stack, and memory sees only the group's inputs
 * and outputs.
 *
 * Same bits as the members' own loops: add, sub, mul, div and the powers
 * 2 and 3 are single IEEE float32 operations (no contraction: the build
 * uses -ffp-contract=off), and every other member runs the block function
 * its eager loop runs (cpu_unary_chain_blk, cpu_binary_chain), on whole
 * blocks of whole vectors. A block shorter than MUSA_CHAIN_N (a tile's
 * tail) is padded with copies of its first element, as the eager loops pad
 * theirs, so no padding lane is out of a function's range when no real one
 * is.
 */
#ifndef MUSA_CPU_CHAIN_H
#define MUSA_CPU_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "../kernel.h"

#define MUSA_CHAIN_N     128 /* elements per block: 8 AVX-512 vectors */
#define MUSA_CHAIN_EXT   16  /* full operands in memory (inputs and outputs) */
#define MUSA_CHAIN_SCAL  8   /* single-element inputs */
#define MUSA_CHAIN_SPILL 6   /* spilled values */
#define MUSA_CHAIN_INS   96  /* instructions */

typedef enum musa_chain_code {
    MUSA_CH_LOAD = 1, /* acc = the source */
    MUSA_CH_BIN,      /* acc = acc op source */
    MUSA_CH_BINR,     /* acc = source op acc */
    MUSA_CH_UNARY,    /* acc = op(acc) */
    MUSA_CH_SPILL,    /* spill slot idx = acc */
    MUSA_CH_STORE,    /* ext idx = acc (plain stores: lower.c says why) */
} musa_chain_code;

typedef enum musa_chain_src {
    MUSA_CH_ACC = 0, /* the accumulator itself */
    MUSA_CH_EXT,     /* a full operand in memory */
    MUSA_CH_SCALAR,  /* a single element, the same for every lane */
    MUSA_CH_SLOT,    /* a spilled value */
} musa_chain_src;

/* What a member computes, from its resolved loop (set at each run). */
typedef enum musa_chain_op {
    MUSA_CHOP_NONE = 0,
    MUSA_CHOP_ADD,
    MUSA_CHOP_SUB,
    MUSA_CHOP_MUL,
    MUSA_CHOP_DIV,
    MUSA_CHOP_POW2, /* a * a: pow's loop for an exponent of 2 (the source is the exponent) */
    MUSA_CHOP_POW3, /* a * a * a */
    MUSA_CHOP_BLK1, /* a unary block function */
    MUSA_CHOP_BLK2, /* a binary block function (operands in the member's order) */
} musa_chain_op;

/* Block functions over MUSA_CHAIN_N elements: o may alias the inputs. */
typedef void (*musa_chain_blk1)(float *o, const float *a);
typedef void (*musa_chain_blk2)(float *o, const float *a, const float *b);

typedef struct musa_chain_ins {
    uint8_t code;   /* musa_chain_code */
    uint8_t src;    /* musa_chain_src of LOAD, BIN, BINR */
    uint8_t idx;    /* the source's (or destination's) index */
    uint8_t op;     /* musa_chain_op of BIN, BINR, UNARY: set at each run */
    int16_t member; /* the group member whose loop gives op */
    musa_chain_blk1 blk1;
    musa_chain_blk2 blk2;
} musa_chain_ins;

typedef struct musa_chain {
    int n_ins, n_ext, n_scal, n_spill;
    uint32_t ext_in;             /* bit k: ext k is read (else written) */
    float scal[MUSA_CHAIN_SCAL]; /* the single elements' values, read at each run */
    musa_chain_ins ins[];        /* [n_ins] in a plan; the builder's has room for MUSA_CHAIN_INS */
} musa_chain;

/* Bytes of a chain of n instructions. */
#define MUSA_CHAIN_BYTES(n) (sizeof(musa_chain) + sizeof(musa_chain_ins) * (size_t)(n))

/* Whether a member whose loop is `fn` can run in a chain, and how: sets
 * the op (and block function) of instruction `ins` for a unary member (BLK1)
 * or a binary one. False for loops a chain does not know. */
bool cpu_unary_chain_op(musa_loop_fn fn, musa_chain_ins *ins);
bool cpu_binary_chain_op(musa_loop_fn fn, musa_chain_ins *ins);

/* Runs the chain over n elements from ext[k] (each operand's element 0;
 * contiguous float32). */
void musa_chain_run(const musa_chain *c, int64_t n, char *const *ext);

#endif
