/*
 * tests/test_serve_cache.c - src/serve/cache.c: hits and misses, owners, the
 * exact LRU eviction order under the byte bound, entries larger than the
 * bound, replacement, drop_owner, held entries surviving eviction, owner
 * drops and destroy, 100k entries through a bounded cache, the probes per
 * lookup at 1k and 100k entries (O(1) lookups, counted rather than timed),
 * and 4 threads at once (run under ASan in the sanitizer build).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "serve/cache.h"

#define OVH SRV_CACHE_ENTRY_OVERHEAD

static void put_s(srv_cache_t *c, uint64_t owner, const char *key, const char *body) {
  srv_cache_put(c, owner, key, strlen(key), body, strlen(body), strlen(body));
}

/* 1 when (owner, key) is there holding body (the lookup makes it most recent). */
static int has(srv_cache_t *c, uint64_t owner, const char *key, const char *body) {
  srv_cache_entry_t *e = srv_cache_get(c, owner, key, strlen(key));
  if (!e) return 0;
  int ok = srv_cache_entry_len(e) == strlen(body) && memcmp(srv_cache_entry_body(e), body, strlen(body)) == 0;
  srv_cache_release(e);
  if (!ok) fail_msg("entry %s holds another body", key);
  return 1;
}

static srv_cache_usage_t usage(srv_cache_t *c) {
  srv_cache_usage_t u;
  srv_cache_usage(c, &u);
  return u;
}

static void test_hit_miss_owner(void **state) {
  (void)state;
  srv_cache_t *c = srv_cache_create(1 << 20);
  assert_non_null(c);
  assert_null(srv_cache_get(c, 1, "k", 1));
  srv_cache_put(c, 1, "k", 1, "{\"a\":1}BIN", 10, 7);
  srv_cache_entry_t *e = srv_cache_get(c, 1, "k", 1);
  assert_non_null(e);
  assert_int_equal(srv_cache_entry_len(e), 10);
  assert_int_equal(srv_cache_entry_json_len(e), 7);
  assert_memory_equal(srv_cache_entry_body(e), "{\"a\":1}BIN", 10);
  srv_cache_release(e);
  assert_null(srv_cache_get(c, 2, "k", 1));      /* other owner */
  assert_null(srv_cache_get(c, 1, "kk", 2));     /* other key */
  assert_null(srv_cache_get(c, 1, "k\0", 2));    /* a key that only starts alike */
  put_s(c, 2, "k", "two");
  assert_true(has(c, 1, "k", "{\"a\":1}BIN"));
  assert_true(has(c, 2, "k", "two"));
  srv_cache_usage_t u = usage(c);
  assert_int_equal(u.entries, 2);
  assert_int_equal(u.bytes, (1 + 10 + OVH) + (1 + 3 + OVH));
  assert_int_equal(u.max_bytes, 1 << 20);
  assert_int_equal(u.evictions, 0);
  /* an empty key and an empty body are entries too */
  srv_cache_put(c, 3, "", 0, "", 0, 0);
  e = srv_cache_get(c, 3, "", 0);
  assert_non_null(e);
  assert_int_equal(srv_cache_entry_len(e), 0);
  srv_cache_release(e);
  srv_cache_destroy(c);
  srv_cache_destroy(NULL);
  assert_null(srv_cache_create(0));
}

static void test_lru_order(void **state) {
  (void)state;
  /* Each entry: key 2 + body 10 + OVH; three fit, not four. */
  size_t one = 2 + 10 + OVH;
  srv_cache_t *c = srv_cache_create(3 * one + one / 2);
  put_s(c, 1, "kA", "0123456789");
  put_s(c, 1, "kB", "0123456789");
  put_s(c, 1, "kC", "0123456789");
  assert_int_equal(usage(c).entries, 3);
  assert_true(has(c, 1, "kA", "0123456789")); /* order now A, C, B (most recent first) */
  put_s(c, 1, "kD", "0123456789");            /* evicts B */
  assert_int_equal(usage(c).evictions, 1);
  assert_false(has(c, 1, "kB", "0123456789"));
  put_s(c, 1, "kE", "0123456789"); /* order D, A, C: evicts C */
  assert_int_equal(usage(c).evictions, 2);
  assert_false(has(c, 1, "kC", "0123456789"));
  put_s(c, 1, "kF", "0123456789"); /* order E, D, A: evicts A */
  assert_false(has(c, 1, "kA", "0123456789"));
  assert_true(has(c, 1, "kD", "0123456789")); /* order D, F, E */
  put_s(c, 1, "kG", "0123456789");            /* evicts E */
  assert_false(has(c, 1, "kE", "0123456789"));
  assert_true(has(c, 1, "kF", "0123456789"));
  assert_true(has(c, 1, "kG", "0123456789"));
  assert_true(has(c, 1, "kD", "0123456789"));
  srv_cache_usage_t u = usage(c);
  assert_int_equal(u.entries, 3);
  assert_int_equal(u.evictions, 4);
  assert_int_equal(u.bytes, 3 * one);
  /* A bigger entry evicts as many of the least recent as it needs: two here. */
  char big[2 * 10 + OVH + 1];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  put_s(c, 1, "kH", big); /* charge 2 + 148 + 128 = 278: the two least recent (F, G) go */
  u = usage(c);
  assert_int_equal(u.evictions, 4 + 2);
  assert_int_equal(u.entries, 2);
  assert_int_equal(u.bytes, one + 278);
  assert_true(has(c, 1, "kH", big));
  assert_true(has(c, 1, "kD", "0123456789"));
  assert_false(has(c, 1, "kF", "0123456789"));
  assert_false(has(c, 1, "kG", "0123456789"));
  srv_cache_destroy(c);
}

static void test_too_big_and_replace(void **state) {
  (void)state;
  size_t bound = 1000;
  srv_cache_t *c = srv_cache_create(bound);
  put_s(c, 1, "k1", "small");
  char body[1000];
  memset(body, 'b', sizeof body);
  /* key + body + overhead one byte over the bound: not kept, nothing evicted */
  size_t n = bound - OVH - 2 + 1;
  srv_cache_put(c, 1, "k2", 2, body, n, n);
  assert_null(srv_cache_get(c, 1, "k2", 2));
  assert_true(has(c, 1, "k1", "small"));
  assert_int_equal(usage(c).evictions, 0);
  /* too big for a key already there: the old entry stays */
  srv_cache_put(c, 1, "k1", 2, body, n, n);
  assert_true(has(c, 1, "k1", "small"));
  /* exactly the bound: kept, after evicting everything else */
  srv_cache_put(c, 1, "k2", 2, body, n - 1, 0);
  srv_cache_entry_t *e = srv_cache_get(c, 1, "k2", 2);
  assert_non_null(e);
  assert_int_equal(srv_cache_entry_len(e), n - 1);
  srv_cache_release(e);
  srv_cache_usage_t u = usage(c);
  assert_int_equal(u.bytes, bound);
  assert_int_equal(u.entries, 1);
  assert_int_equal(u.evictions, 1);
  /* replace: same key, new body; no eviction counted, bytes follow the new body */
  srv_cache_destroy(c);
  c = srv_cache_create(1 << 16);
  put_s(c, 7, "key", "v1");
  put_s(c, 7, "key", "version-two");
  assert_true(has(c, 7, "key", "version-two"));
  u = usage(c);
  assert_int_equal(u.entries, 1);
  assert_int_equal(u.bytes, 3 + 11 + OVH);
  assert_int_equal(u.evictions, 0);
  /* json_len beyond len is refused */
  srv_cache_put(c, 7, "bad", 3, "ab", 2, 3);
  assert_null(srv_cache_get(c, 7, "bad", 3));
  srv_cache_destroy(c);
}

static void test_drop_owner_and_held(void **state) {
  (void)state;
  srv_cache_t *c = srv_cache_create(1 << 16);
  put_s(c, 1, "a", "1a");
  put_s(c, 1, "b", "1b");
  put_s(c, 2, "a", "2a");
  put_s(c, 1, "c", "1c");
  put_s(c, 2, "b", "2b");
  srv_cache_entry_t *held = srv_cache_get(c, 1, "b", 1);
  assert_non_null(held);
  srv_cache_drop_owner(c, 1);
  srv_cache_usage_t u = usage(c);
  assert_int_equal(u.entries, 2);
  assert_int_equal(u.bytes, 2 * (1 + 2 + OVH));
  assert_false(has(c, 1, "a", "1a"));
  assert_false(has(c, 1, "b", "1b"));
  assert_false(has(c, 1, "c", "1c"));
  assert_true(has(c, 2, "a", "2a"));
  assert_true(has(c, 2, "b", "2b"));
  assert_memory_equal(srv_cache_entry_body(held), "1b", 2); /* still valid: held */
  srv_cache_release(held);
  srv_cache_drop_owner(c, 99); /* nothing of that owner */
  assert_int_equal(usage(c).entries, 2);
  srv_cache_destroy(c);

  /* held through eviction, replacement and destroy */
  size_t one = 1 + 4 + OVH;
  c = srv_cache_create(2 * one);
  put_s(c, 1, "x", "xxxx");
  srv_cache_entry_t *hx = srv_cache_get(c, 1, "x", 1);
  put_s(c, 1, "y", "yyyy");
  put_s(c, 1, "z", "zzzz"); /* evicts x, which is held */
  assert_false(has(c, 1, "x", "xxxx"));
  assert_int_equal(usage(c).evictions, 1);
  assert_memory_equal(srv_cache_entry_body(hx), "xxxx", 4);
  srv_cache_entry_t *hy = srv_cache_get(c, 1, "y", 1);
  put_s(c, 1, "y", "YYYY"); /* replaced while held */
  assert_memory_equal(srv_cache_entry_body(hy), "yyyy", 4);
  assert_true(has(c, 1, "y", "YYYY"));
  srv_cache_entry_t *hz = srv_cache_get(c, 1, "z", 1);
  srv_cache_destroy(c); /* entries still held outlive the cache */
  assert_memory_equal(srv_cache_entry_body(hz), "zzzz", 4);
  srv_cache_release(hx);
  srv_cache_release(hy);
  srv_cache_release(hz);
  srv_cache_release(NULL);
}

static void test_many_entries(void **state) {
  (void)state;
  /* key "key-%06d" (10 bytes), body 22 bytes: 160 bytes each with the overhead */
  size_t one = 10 + 22 + OVH;
  srv_cache_t *c = srv_cache_create(10000 * one);
  char key[16], body[32];
  for (int i = 0; i < 100000; i++) {
    snprintf(key, sizeof key, "key-%06d", i);
    snprintf(body, sizeof body, "body-%017d", i);
    assert_int_equal(strlen(body), 22);
    srv_cache_put(c, 5, key, 10, body, 22, 22);
  }
  srv_cache_usage_t u = usage(c);
  assert_int_equal(u.entries, 10000);
  assert_int_equal(u.evictions, 90000);
  assert_int_equal(u.bytes, 10000 * one);
  int hits = 0;
  for (int i = 0; i < 100000; i++) {
    snprintf(key, sizeof key, "key-%06d", i);
    snprintf(body, sizeof body, "body-%017d", i);
    int h = has(c, 5, key, body);
    if (h != (i >= 90000)) fail_msg("key %d: %s", i, h ? "still there" : "gone");
    hits += h;
  }
  assert_int_equal(hits, 10000);
  srv_cache_drop_owner(c, 5);
  u = usage(c);
  assert_int_equal(u.entries, 0);
  assert_int_equal(u.bytes, 0);
  srv_cache_destroy(c);
}

/* Average probes per lookup over `lookups` lookups (half hits, half misses) at `fill` entries. */
static double probes_at(int fill, int lookups) {
  srv_cache_t *c = srv_cache_create((size_t)1 << 30);
  char key[32];
  for (int i = 0; i < fill; i++) {
    int n = snprintf(key, sizeof key, "k%d", i);
    srv_cache_put(c, 1, key, (size_t)n, "v", 1, 1);
  }
  assert_int_equal(usage(c).entries, fill);
  srv_cache_usage_t before = usage(c);
  int hits = 0;
  for (int i = 0; i < lookups; i++) {
    int n = snprintf(key, sizeof key, "k%d", i % 2 ? (i / 2) % fill : fill + i);
    srv_cache_entry_t *e = srv_cache_get(c, 1, key, (size_t)n);
    if (e) hits++;
    srv_cache_release(e);
  }
  assert_int_equal(hits, lookups / 2);
  srv_cache_usage_t after = usage(c);
  assert_int_equal(after.lookups - before.lookups, lookups);
  double avg = (double)(after.probes - before.probes) / (double)lookups;
  srv_cache_destroy(c);
  return avg;
}

static void test_probes_constant(void **state) {
  (void)state;
  double small = probes_at(1000, 100000), large = probes_at(100000, 100000);
  if (getenv("TOPLU_TEST_VERBOSE")) printf("probes per lookup: %.3f at 1k entries, %.3f at 100k\n", small, large);
  /* a hit compares at least its own entry: half the lookups give >= 0.5 */
  assert_true(small >= 0.5 && small < 2.0);
  assert_true(large >= 0.5 && large < 2.0);
}

#define N_THREADS 4
#define N_OPS 20000
#define N_KEYS 3000

typedef struct worker_arg {
  srv_cache_t *c;
  int id;
  int bad;
} worker_arg_t;

static void body_for(uint64_t owner, int k, char *body, size_t size) {
  snprintf(body, size, "owner %llu key %05d ................", (unsigned long long)owner, k);
}

static void *worker(void *p) {
  worker_arg_t *a = p;
  uint32_t r = 2463534242u + (uint32_t)a->id * 7919u;
  char key[16], body[64], want[64];
  for (int i = 0; i < N_OPS; i++) {
    r ^= r << 13, r ^= r >> 17, r ^= r << 5;
    int k = (int)(r % N_KEYS);
    uint64_t owner = 1 + (r >> 20) % 2;
    int n = snprintf(key, sizeof key, "%05d", k);
    srv_cache_entry_t *e = srv_cache_get(a->c, owner, key, (size_t)n);
    body_for(owner, k, want, sizeof want);
    if (e) {
      if (srv_cache_entry_len(e) != strlen(want) || memcmp(srv_cache_entry_body(e), want, strlen(want)) != 0) a->bad++;
      srv_cache_release(e);
    } else {
      body_for(owner, k, body, sizeof body);
      srv_cache_put(a->c, owner, key, (size_t)n, body, strlen(body), strlen(body));
    }
    if (i % 5000 == 4999) srv_cache_drop_owner(a->c, 1 + (uint64_t)(a->id % 2));
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  size_t one = 5 + strlen("owner 1 key 00000 ................") + OVH;
  srv_cache_t *c = srv_cache_create(1000 * one);
  pthread_t t[N_THREADS];
  worker_arg_t args[N_THREADS];
  for (int i = 0; i < N_THREADS; i++) {
    args[i] = (worker_arg_t){c, i, 0};
    assert_int_equal(pthread_create(&t[i], NULL, worker, &args[i]), 0);
  }
  for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < N_THREADS; i++) assert_int_equal(args[i].bad, 0);
  srv_cache_usage_t u = usage(c);
  assert_true(u.entries > 0 && u.entries <= 1000);
  assert_int_equal(u.bytes, (size_t)u.entries * one);
  assert_true(u.evictions > 0);
  assert_int_equal(u.lookups, N_THREADS * N_OPS);
  srv_cache_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hit_miss_owner),      cmocka_unit_test(test_lru_order),
      cmocka_unit_test(test_too_big_and_replace), cmocka_unit_test(test_drop_owner_and_held),
      cmocka_unit_test(test_many_entries),        cmocka_unit_test(test_probes_constant),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
