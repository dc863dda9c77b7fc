/*
 * tlcache.h - per-thread free lists for small fixed-size objects that are
 * created and destroyed on every op (tensor and storage structs). Popping
 * and pushing take no lock; each list is bounded, and a thread's lists are
 * freed when the thread exits.
 */
#ifndef MUSA_TLCACHE_H
#define MUSA_TLCACHE_H

#include "base.h"

enum { MUSA_TL_TENSOR, MUSA_TL_STORAGE, MUSA_TL_META, MUSA_TL_NODE, MUSA_TL_KINDS };

/* Objects of kind MUSA_TL_NODE are allocated at this size (callers with
 * bigger objects use plain malloc). */
#define MUSA_TL_NODE_SIZE 512

/* `size` bytes for object kind `kind` (always the same size per kind);
 * NULL with MUSA_ERR_NOMEM set on failure. */
void *musa_tl_alloc(int kind, size_t size, const char *where);
void musa_tl_free(int kind, void *p);

#endif
