/*
 * serve/cache.c - the response cache: a chained hash table (power-of-two
 * buckets, doubled when the entries outnumber them, so chains stay about one
 * entry long) and a doubly-linked LRU list, bounded in bytes.
 *
 * Entries are immutable and reference-counted: the cache holds one
 * reference while an entry is in the table, each srv_cache_get one more.
 * Removing an entry (eviction, replacement, drop_owner, destroy) drops the
 * cache's reference; the entry is freed by whoever drops the last one, after
 * the mutex is released.
 */
#include "serve/cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "core/hash.h"

struct srv_cache_entry {
  _Atomic int64_t refs;
  uint64_t owner, hash;
  size_t key_len, len, json_len, charge;
  srv_cache_entry_t *prev, *next; /* LRU list: head most recent */
  srv_cache_entry_t *chain;       /* next in the bucket; after removal, next to free */
  char data[];                    /* key bytes, then body bytes, then a NUL */
};

struct srv_cache {
  pthread_mutex_t mu;
  srv_cache_entry_t **buckets;
  size_t n_buckets; /* a power of two */
  srv_cache_entry_t *head, *tail;
  size_t bytes, max_bytes;
  int64_t entries, evictions, lookups, probes;
};

#define INITIAL_BUCKETS 64

srv_cache_t *srv_cache_create(size_t max_bytes) {
  if (max_bytes == 0) return NULL;
  srv_cache_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->buckets = calloc(INITIAL_BUCKETS, sizeof *c->buckets);
  if (!c->buckets || pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c->buckets);
    free(c);
    return NULL;
  }
  c->n_buckets = INITIAL_BUCKETS;
  c->max_bytes = max_bytes;
  return c;
}

/* Drop one reference; free at the last. */
static void unref(srv_cache_entry_t *e) {
  if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) free(e);
}

void srv_cache_release(srv_cache_entry_t *e) {
  if (e) unref(e);
}

/* The key's hash: FNV-1a of the owner and the key bytes, then mixed (the
 * bucket index takes the low bits). */
static uint64_t key_hash(uint64_t owner, const void *key, size_t key_len) {
  uint8_t ob[8];
  for (int i = 0; i < 8; i++) ob[i] = (uint8_t)(owner >> (8 * i));
  uint64_t h = toplu__fnv1a64(toplu__fnv1a64(TOPLU__FNV1A64_INIT, ob, 8), key, key_len);
  h ^= h >> 33;
  h *= UINT64_C(0xff51afd7ed558ccd);
  h ^= h >> 33;
  return h;
}

static void lru_unlink(srv_cache_t *c, srv_cache_entry_t *e) {
  if (e->prev) e->prev->next = e->next;
  else c->head = e->next;
  if (e->next) e->next->prev = e->prev;
  else c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push_front(srv_cache_t *c, srv_cache_entry_t *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

/* Take e out of the table and the list (under the mutex); it joins *freed,
 * whose cache references the caller drops after unlocking. */
static void remove_entry(srv_cache_t *c, srv_cache_entry_t *e, srv_cache_entry_t **freed) {
  srv_cache_entry_t **p = &c->buckets[e->hash & (c->n_buckets - 1)];
  while (*p != e) p = &(*p)->chain;
  *p = e->chain;
  lru_unlink(c, e);
  c->bytes -= e->charge;
  c->entries--;
  e->chain = *freed;
  *freed = e;
}

static void drop_list(srv_cache_entry_t *e) {
  while (e) {
    srv_cache_entry_t *n = e->chain;
    unref(e);
    e = n;
  }
}

/* The entry for (hash, owner, key) or NULL; counts the probes of lookups (count). */
static srv_cache_entry_t *find(srv_cache_t *c, uint64_t h, uint64_t owner, const void *key, size_t key_len,
                               int count) {
  for (srv_cache_entry_t *e = c->buckets[h & (c->n_buckets - 1)]; e; e = e->chain) {
    c->probes += count;
    if (e->hash == h && e->owner == owner && e->key_len == key_len && memcmp(e->data, key, key_len) == 0) return e;
  }
  return NULL;
}

/* Double the buckets when the entries outnumber them (out of memory: keep the
 * table, chains grow longer). */
static void maybe_grow(srv_cache_t *c) {
  if ((size_t)c->entries <= c->n_buckets || c->n_buckets > SIZE_MAX / 2 / sizeof *c->buckets) return;
  size_t n = c->n_buckets * 2;
  srv_cache_entry_t **nb = calloc(n, sizeof *nb);
  if (!nb) return;
  for (size_t i = 0; i < c->n_buckets; i++) {
    srv_cache_entry_t *e = c->buckets[i];
    while (e) {
      srv_cache_entry_t *next = e->chain;
      size_t b = e->hash & (n - 1);
      e->chain = nb[b];
      nb[b] = e;
      e = next;
    }
  }
  free(c->buckets);
  c->buckets = nb;
  c->n_buckets = n;
}

srv_cache_entry_t *srv_cache_get(srv_cache_t *c, uint64_t owner, const void *key, size_t key_len) {
  if (!c) return NULL;
  uint64_t h = key_hash(owner, key, key_len);
  pthread_mutex_lock(&c->mu);
  c->lookups++;
  srv_cache_entry_t *e = find(c, h, owner, key, key_len, 1);
  if (e) {
    if (c->head != e) {
      lru_unlink(c, e);
      lru_push_front(c, e);
    }
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&c->mu);
  return e;
}

void srv_cache_put(srv_cache_t *c, uint64_t owner, const void *key, size_t key_len, const void *body, size_t len,
                   size_t json_len) {
  if (!c || json_len > len) return;
  size_t charge, alloc;
  if (!toplu__add_size(key_len, len, &charge) || !toplu__add_size(charge, SRV_CACHE_ENTRY_OVERHEAD, &charge) ||
      charge > c->max_bytes)
    return;
  if (!toplu__add_size(sizeof(srv_cache_entry_t), key_len, &alloc) || !toplu__add_size(alloc, len, &alloc) ||
      !toplu__add_size(alloc, 1, &alloc))
    return;
  srv_cache_entry_t *e = malloc(alloc);
  if (!e) return;
  atomic_init(&e->refs, 1);
  e->owner = owner;
  e->hash = key_hash(owner, key, key_len);
  e->key_len = key_len;
  e->len = len;
  e->json_len = json_len;
  e->charge = charge;
  e->prev = e->next = e->chain = NULL;
  if (key_len) memcpy(e->data, key, key_len);
  if (len) memcpy(e->data + key_len, body, len);
  e->data[key_len + len] = 0;

  srv_cache_entry_t *freed = NULL;
  pthread_mutex_lock(&c->mu);
  srv_cache_entry_t *old = find(c, e->hash, owner, key, key_len, 0);
  if (old) remove_entry(c, old, &freed);
  while (c->tail && c->bytes + charge > c->max_bytes) {
    remove_entry(c, c->tail, &freed);
    c->evictions++;
  }
  size_t b = e->hash & (c->n_buckets - 1);
  e->chain = c->buckets[b];
  c->buckets[b] = e;
  lru_push_front(c, e);
  c->bytes += charge;
  c->entries++;
  maybe_grow(c);
  pthread_mutex_unlock(&c->mu);
  drop_list(freed);
}

void srv_cache_drop_owner(srv_cache_t *c, uint64_t owner) {
  if (!c) return;
  srv_cache_entry_t *freed = NULL;
  pthread_mutex_lock(&c->mu);
  for (srv_cache_entry_t *e = c->head, *next; e; e = next) {
    next = e->next;
    if (e->owner == owner) remove_entry(c, e, &freed);
  }
  pthread_mutex_unlock(&c->mu);
  drop_list(freed);
}

void srv_cache_destroy(srv_cache_t *c) {
  if (!c) return;
  srv_cache_entry_t *freed = NULL;
  while (c->head) remove_entry(c, c->head, &freed);
  drop_list(freed);
  pthread_mutex_destroy(&c->mu);
  free(c->buckets);
  free(c);
}

const char *srv_cache_entry_body(const srv_cache_entry_t *e) { return e->data + e->key_len; }
size_t srv_cache_entry_len(const srv_cache_entry_t *e) { return e->len; }
size_t srv_cache_entry_json_len(const srv_cache_entry_t *e) { return e->json_len; }

void srv_cache_usage(srv_cache_t *c, srv_cache_usage_t *u) {
  memset(u, 0, sizeof *u);
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  u->bytes = c->bytes;
  u->max_bytes = c->max_bytes;
  u->entries = c->entries;
  u->evictions = c->evictions;
  u->lookups = c->lookups;
  u->probes = c->probes;
  pthread_mutex_unlock(&c->mu);
}
