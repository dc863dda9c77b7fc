/*
 * arena.h - bump allocation for things that die together (graphs, IR, pass
 * scratch, plans). One musa_arena_free releases everything at once.
 *
 * Invariants: blocks are never moved, so pointers into an arena stay valid
 * until the arena is reset or freed.
 */
#ifndef MUSA_ARENA_H
#define MUSA_ARENA_H

#include "base.h"

typedef struct musa_arena_chunk musa_arena_chunk;

typedef struct musa_arena {
    musa_arena_chunk *head; /* newest chunk first */
    size_t chunk_size;      /* bytes of the next chunk (bigger requests get their own) */
    size_t chunk_max;       /* chunk_size doubles with each chunk up to this */
    size_t used;            /* bytes handed out, for statistics */
} musa_arena;

/* chunk_size 0 picks the default: chunks of 4 KiB, doubling up to 64 KiB
 * (a small graph or plan then holds little). Never fails. */
void musa_arena_init(musa_arena *a, size_t chunk_size);
/* `bytes` aligned to `align` (a power of two <= 64), zeroed. NULL with
 * MUSA_ERR_NOMEM set on failure. */
void *musa_arena_alloc(musa_arena *a, size_t bytes, size_t align);
/* Copy of a NUL-terminated string; NULL on failure. */
char *musa_arena_strdup(musa_arena *a, const char *s);
/* Release all memory; the arena can be reused after musa_arena_init. */
void musa_arena_free(musa_arena *a);

#define MUSA_ARENA_NEW(a, T, n) ((T *)musa_arena_alloc((a), sizeof(T) * (size_t)(n), _Alignof(T)))

#endif
