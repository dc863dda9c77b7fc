/*
 * prim_cache.c - the oneDNN primitive cache (prim_cache.h).
 */
#include "prim_cache.h"

#include <stddef.h>

static void drop(musa_prim_cache *c, musa_prim_node *n) {
    if (n->refs == 0)
        c->destroy(n);
    else
        n->retired = true;
}

musa_prim_node *musa_prim_cache_get(musa_prim_cache *c,
                                    bool (*match)(const musa_prim_node *, const void *),
                                    musa_prim_node *(*make)(const void *), const void *key) {
    pthread_mutex_lock(&c->mu);
    musa_prim_node *prev = NULL, *n = c->head;
    for (; n && !match(n, key); prev = n, n = n->next) {
    }
    if (n && prev) { /* to the front */
        prev->next = n->next;
        n->next = c->head, c->head = n;
    }
    if (!n && (n = make(key))) {
        if (c->len >= c->max) { /* evict the last */
            musa_prim_node **p = &c->head;
            while ((*p)->next) p = &(*p)->next;
            musa_prim_node *old = *p;
            *p = NULL;
            c->len--;
            drop(c, old);
        }
        n->next = c->head, c->head = n, c->len++;
    }
    if (n) n->refs++;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void musa_prim_cache_release(musa_prim_cache *c, musa_prim_node *n) {
    if (!n) return;
    pthread_mutex_lock(&c->mu);
    if (--n->refs == 0 && n->retired) c->destroy(n);
    pthread_mutex_unlock(&c->mu);
}
