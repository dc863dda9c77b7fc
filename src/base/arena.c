/*
 * arena.c - chunked bump allocator (see arena.h).
 */
#include "arena.h"

struct musa_arena_chunk {
    musa_arena_chunk *next;
    size_t size; /* usable bytes in data[] */
    size_t top;  /* first free byte */
    _Alignas(64) unsigned char data[];
};

void musa_arena_init(musa_arena *a, size_t chunk_size) {
    a->head = NULL;
    a->chunk_size = chunk_size ? chunk_size : 4 * 1024;
    a->chunk_max = chunk_size ? chunk_size : 64 * 1024;
    a->used = 0;
}

void *musa_arena_alloc(musa_arena *a, size_t bytes, size_t align) {
    MUSA_ASSERT(align && (align & (align - 1)) == 0 && align <= 64);
    musa_arena_chunk *c = a->head;
    if (c) {
        size_t start = (c->top + align - 1) & ~(align - 1);
        if (start <= c->size && bytes <= c->size - start) {
            c->top = start + bytes;
            a->used += bytes;
            memset(c->data + start, 0, bytes);
            return c->data + start;
        }
    }
    size_t size = bytes > a->chunk_size ? bytes : a->chunk_size;
    if (size > SIZE_MAX - sizeof(musa_arena_chunk)) {
        musa_err_nomem("arena", bytes);
        return NULL;
    }
    size_t total = (sizeof(musa_arena_chunk) + size + 63) & ~(size_t)63;
    c = aligned_alloc(64, total); /* data[] is 64-byte aligned within the chunk */
    if (!c) {
        musa_err_nomem("arena", bytes);
        return NULL;
    }
    c->size = size;
    c->top = bytes;
    /* A big request gets its own chunk placed behind the current one, so the
     * current chunk's free space is not wasted. */
    if (a->head && bytes > a->chunk_size) {
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
        if (a->chunk_size < a->chunk_max) a->chunk_size *= 2;
    }
    a->used += bytes;
    memset(c->data, 0, bytes);
    return c->data;
}

char *musa_arena_strdup(musa_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *p = musa_arena_alloc(a, n, 1);
    if (p) memcpy(p, s, n);
    return p;
}

void musa_arena_free(musa_arena *a) {
    musa_arena_chunk *c = a->head;
    while (c) {
        musa_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}
