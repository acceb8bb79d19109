/*
 * serve/cache.h - the response cache: encoded responses by request key, LRU,
 * bounded in bytes.
 *
 * One cache serves every model (Triton's --cache-config local,size=N); each
 * entry belongs to an owner (a loaded model version, a number the server
 * picks), so a reload drops that owner's entries.  A key is the bytes of
 * srv_infer_cache_key (model, version, inputs, requested outputs); lookups
 * hash it (core/hash.h) into a table that grows with the entry count, so a
 * lookup is O(1) whatever the fill, and compare the whole key.  An entry's
 * bytes are its key plus its body plus a fixed overhead; inserting past the
 * bound evicts least recently used entries first; a body larger than the
 * whole bound is not kept.
 *
 * Entries are immutable and reference-counted: a hit returns an entry the
 * caller holds until srv_cache_release, while eviction goes on.
 * Thread-safe (one mutex; nothing slow is done under it).
 */
#ifndef TOPLU_SERVE_CACHE_H
#define TOPLU_SERVE_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* The fixed bytes counted per entry beyond its key and body (the entry's
 * header and its table slot). */
#define SRV_CACHE_ENTRY_OVERHEAD 128

typedef struct srv_cache srv_cache_t;
typedef struct srv_cache_entry srv_cache_entry_t;

/* A cache bounded to max_bytes (> 0).  NULL when out of memory. */
srv_cache_t *srv_cache_create(size_t max_bytes);
/* Free the cache; entries still held stay valid until released.  NULL-safe. */
void srv_cache_destroy(srv_cache_t *c);

/* The entry for (owner, key), made most recently used and held (release it), or NULL. */
srv_cache_entry_t *srv_cache_get(srv_cache_t *c, uint64_t owner, const void *key, size_t key_len);
/* Keep body (len bytes, json_len of them the JSON part) for (owner, key),
 * replacing an entry of that key, as the most recently used.  Copies.
 * Out of memory, or key + body + SRV_CACHE_ENTRY_OVERHEAD more than the
 * bound: nothing is kept (an entry of that key already there stays). */
void srv_cache_put(srv_cache_t *c, uint64_t owner, const void *key, size_t key_len, const void *body, size_t len,
                   size_t json_len);
void srv_cache_release(srv_cache_entry_t *e);
const char *srv_cache_entry_body(const srv_cache_entry_t *e);
size_t srv_cache_entry_len(const srv_cache_entry_t *e);
size_t srv_cache_entry_json_len(const srv_cache_entry_t *e);

/* Drop every entry of owner (a model version unloaded or reloaded). */
void srv_cache_drop_owner(srv_cache_t *c, uint64_t owner);

/* Bytes held (as counted against the bound), entries, and the bound;
 * evictions: entries removed to make room (not replacements, not
 * drop_owner).  lookups and probes are a diagnostic: srv_cache_get calls
 * and the entries they compared in all, so probes / lookups is the average
 * chain a lookup walked (the table grows to keep it near 1). */
typedef struct srv_cache_usage {
  size_t bytes, max_bytes;
  int64_t entries, evictions;
  int64_t lookups, probes;
} srv_cache_usage_t;
void srv_cache_usage(srv_cache_t *c, srv_cache_usage_t *u);

#endif
