/*
 * tlcache.c - see tlcache.h. A pthread key destructor drains a thread's
 * lists at exit; the lists of the thread that loads musa are drained at
 * process exit by the same function.
 *
 * Under AddressSanitizer the cache is bypassed: recycling an object would
 * make a leak or use-after-free report blame the object's first owner.
 */
#include "tlcache.h"

#include <pthread.h>

#if defined(__SANITIZE_ADDRESS__)

void *musa_tl_alloc(int kind, size_t size, const char *where) {
    MUSA_UNUSED(kind);
    return musa_malloc(size, where);
}

void musa_tl_free(int kind, void *p) {
    MUSA_UNUSED(kind);
    free(p);
}

#else

#define TL_MAX 128

typedef struct {
    void *items[MUSA_TL_KINDS][TL_MAX];
    int n[MUSA_TL_KINDS];
    bool registered;
} tl_lists;

static _Thread_local tl_lists tl;
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

static void drain(void *arg) {
    tl_lists *l = arg;
    for (int k = 0; k < MUSA_TL_KINDS; k++) {
        for (int i = 0; i < l->n[k]; i++) free(l->items[k][i]);
        l->n[k] = 0;
    }
}

static void drain_main(void) {
    drain(&tl);
}

static void make_key(void) {
    pthread_key_create(&tl_key, drain);
    atexit(drain_main);
}

void *musa_tl_alloc(int kind, size_t size, const char *where) {
    if (tl.n[kind] > 0) return tl.items[kind][--tl.n[kind]];
    return musa_malloc(size, where);
}

void musa_tl_free(int kind, void *p) {
    if (!p) return;
    if (!tl.registered) {
        pthread_once(&tl_once, make_key);
        pthread_setspecific(tl_key, &tl);
        tl.registered = true;
    }
    if (tl.n[kind] < TL_MAX)
        tl.items[kind][tl.n[kind]++] = p;
    else
        free(p);
}

#endif
