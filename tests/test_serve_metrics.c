/*
 * tests/test_serve_metrics.c - src/serve/metrics.c: known values recorded,
 * the Prometheus text read back with a small line parser (text exposition
 * format 0.0.4: HELP/TYPE once per family, label values unescaped), exact
 * sums, cumulative buckets, _count equal to the records, the statistics
 * JSON read back with jansson, and 4 threads x 100k records giving exact totals.
 */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "serve/metrics.h"

/* ---- a minimal Prometheus text parser ---- */

#define MAX_SAMPLES 4096
#define MAX_LABELS 4

typedef struct sample {
  char name[96];
  int n_labels;
  char key[MAX_LABELS][32];
  char value[MAX_LABELS][128];
  double v;
} sample_t;

typedef struct parsed {
  sample_t s[MAX_SAMPLES];
  int n;
  char help[128][96], type_name[128][96], type[128][128];
  int n_help, n_type;
} parsed_t;

static parsed_t g_p;

/* Parse text into g_p; fails the test on a line that is not valid 0.0.4. */
static void parse_text(const char *text, size_t len) {
  memset(&g_p, 0, sizeof g_p);
  const char *p = text, *end = text + len;
  assert_true(len > 0 && text[len - 1] == '\n');
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    assert_non_null(nl);
    char line[1024];
    size_t n = (size_t)(nl - p);
    assert_true(n < sizeof line);
    memcpy(line, p, n);
    line[n] = 0;
    p = nl + 1;
    if (line[0] == '#') {
      char name[96], rest[128];
      if (sscanf(line, "# HELP %95s %127[^\n]", name, rest) == 2) {
        assert_true(g_p.n_help < 128);
        strcpy(g_p.help[g_p.n_help++], name);
      } else if (sscanf(line, "# TYPE %95s %127s", name, rest) == 2) {
        assert_true(g_p.n_type < 128);
        strcpy(g_p.type_name[g_p.n_type], name);
        memcpy(g_p.type[g_p.n_type++], rest, sizeof rest);
      } else {
        fail_msg("bad comment line: %s", line);
      }
      continue;
    }
    assert_true(g_p.n < MAX_SAMPLES);
    sample_t *s = &g_p.s[g_p.n++];
    const char *q = line;
    size_t k = 0;
    while (*q && *q != '{' && *q != ' ') {
      assert_true(k + 1 < sizeof s->name);
      s->name[k++] = *q++;
    }
    if (*q == '{') {
      q++;
      while (*q != '}') {
        assert_true(s->n_labels < MAX_LABELS);
        k = 0;
        while (*q != '=') {
          assert_true(*q && k + 1 < 32);
          s->key[s->n_labels][k++] = *q++;
        }
        q++;
        assert_int_equal(*q, '"');
        q++;
        k = 0;
        while (*q != '"') {
          assert_true(*q && k + 1 < 128);
          if (*q == '\\') {
            q++;
            if (*q == 'n') s->value[s->n_labels][k++] = '\n';
            else if (*q == '\\' || *q == '"') s->value[s->n_labels][k++] = *q;
            else fail_msg("bad escape in %s", line);
            q++;
          } else {
            s->value[s->n_labels][k++] = *q++;
          }
        }
        q++;
        s->n_labels++;
        if (*q == ',') q++;
        else assert_int_equal(*q, '}');
      }
      q++;
    }
    assert_int_equal(*q, ' ');
    char *e = NULL;
    s->v = strtod(q + 1, &e);
    if (!e || *e) fail_msg("bad value in %s", line);
  }
}

static const char *label(const sample_t *s, const char *key) {
  for (int i = 0; i < s->n_labels; i++)
    if (strcmp(s->key[i], key) == 0) return s->value[i];
  return NULL;
}

/* The value of the one sample name{model, and key=value when key is not NULL}; fails when not exactly one. */
static double value(const char *name, const char *model, const char *key, const char *val) {
  int found = 0;
  double v = 0;
  for (int i = 0; i < g_p.n; i++) {
    const sample_t *s = &g_p.s[i];
    if (strcmp(s->name, name) != 0) continue;
    if (model && (!label(s, "model") || strcmp(label(s, "model"), model) != 0)) continue;
    if (key && (!label(s, key) || strcmp(label(s, key), val) != 0)) continue;
    found++;
    v = s->v;
  }
  if (found != 1) fail_msg("%d samples of %s model=%s %s=%s", found, name, model ? model : "-", key ? key : "-",
                           val ? val : "-");
  return v;
}

static const char *type_of(const char *family) {
  const char *t = NULL;
  int n = 0;
  for (int i = 0; i < g_p.n_type; i++)
    if (strcmp(g_p.type_name[i], family) == 0) t = g_p.type[i], n++;
  if (n != 1) fail_msg("TYPE for %s given %d times", family, n);
  int h = 0;
  for (int i = 0; i < g_p.n_help; i++) h += strcmp(g_p.help[i], family) == 0;
  if (h != 1) fail_msg("HELP for %s given %d times", family, h);
  return t;
}

/* Every sample belongs to a family with HELP and TYPE given exactly once. */
static void check_families(void) {
  for (int i = 0; i < g_p.n_type; i++)
    for (int j = i + 1; j < g_p.n_type; j++)
      if (strcmp(g_p.type_name[i], g_p.type_name[j]) == 0) fail_msg("TYPE %s twice", g_p.type_name[i]);
  for (int i = 0; i < g_p.n; i++) {
    char fam[96];
    snprintf(fam, sizeof fam, "%s", g_p.s[i].name);
    const char *suffixes[] = {"_bucket", "_sum", "_count"};
    int known = 0;
    for (int j = 0; j < g_p.n_type; j++) known |= strcmp(g_p.type_name[j], fam) == 0;
    for (int k = 0; k < 3 && !known; k++) {
      size_t l = strlen(fam), sl = strlen(suffixes[k]);
      if (l > sl && strcmp(fam + l - sl, suffixes[k]) == 0) {
        char base[96];
        snprintf(base, sizeof base, "%.*s", (int)(l - sl), fam);
        for (int j = 0; j < g_p.n_type; j++)
          known |= strcmp(g_p.type_name[j], base) == 0 && strcmp(g_p.type[j], "histogram") == 0;
      }
    }
    if (!known) fail_msg("sample %s has no TYPE line", fam);
  }
}

/* ---- tests ---- */

static const int64_t kBounds[] = {100, 250, 500, 1000, 2500, 5000, 10000, 25000,
                                  50000, 100000, 250000, 500000, 1000000, 2500000, 5000000};

static void test_prometheus(void **state) {
  (void)state;
  srv_metrics_t *a = srv_metrics_create(), *b = srv_metrics_create();
  assert_non_null(a);
  assert_non_null(b);
  /* model a: 3 successes, 1 cache hit, 2 misses, failures, 2 batches */
  srv_metrics_success(a, 50000, 1000, 2000, 3000, 4000);       /* 50 us request, 1 us queue */
  srv_metrics_success(a, 300000, 250000, 2000, 3000, 4000);    /* 300 us, 250 us queue (le 250 exactly) */
  srv_metrics_success(a, 7000000000, 100001, 2000, 3000, 4000); /* 7 s: +Inf; queue 100.001 us: le 250 */
  srv_metrics_cache_hit(a, 20000, 5000);
  srv_metrics_cache_miss(a, 7000);
  srv_metrics_cache_miss(a, 9000);
  srv_metrics_failure(a, SRV_FAIL_REJECTED, 1000);
  srv_metrics_failure(a, SRV_FAIL_REJECTED, 1000);
  srv_metrics_failure(a, SRV_FAIL_BAD_REQUEST, 1000);
  srv_metrics_batch(a, 1, 2000, 3000, 4000);
  srv_metrics_batch(a, 2, 2000, 3000, 4000);
  srv_metrics_batch(a, 300, 1, 1, 1);
  srv_metrics_pending(a, 5);
  srv_metrics_pending(a, -2);
  srv_metrics_model_t models[2] = {{"a", "1", a, 12345}, {"we\"ird\\na\nme", "2", b, 0}};
  srv_metrics_server_t server = {{0, 1, 20, 3, 4, 5}, 7, 3, 2, 1000, 4000, 9, 11, 6, 1, 1, 0.375, 8192, 3072};
  pl_buf_t out = {0};
  srv_metrics_prometheus(models, 2, &server, &out);
  assert_int_equal(out.oom, 0);
  if (getenv("TOPLU_TEST_VERBOSE")) fwrite(out.data, 1, out.len, stdout);
  parse_text(out.data, out.len);
  check_families();

  assert_string_equal(type_of("nv_inference_request_success"), "counter");
  assert_string_equal(type_of("nv_inference_pending_request_count"), "gauge");
  assert_string_equal(type_of("toplu_inference_request_duration_us"), "histogram");
  assert_string_equal(type_of("toplu_memory_bytes"), "gauge");
  assert_true(value("nv_inference_request_success", "a", NULL, NULL) == 4);
  assert_true(value("nv_inference_request_failure", "a", "reason", "REJECTED") == 2);
  assert_true(value("nv_inference_request_failure", "a", "reason", "BAD_REQUEST") == 1);
  assert_true(value("nv_inference_request_failure", "a", "reason", "CANCELED") == 0);
  assert_true(value("nv_inference_request_failure", "a", "reason", "BACKEND") == 0);
  assert_true(value("nv_inference_request_failure", "a", "reason", "OTHER") == 0);
  /* every reason for every model, so that failures sum */
  assert_true(value("nv_inference_request_failure", "we\"ird\\na\nme", "reason", "OTHER") == 0);
  assert_true(value("nv_inference_count", "a", NULL, NULL) == 303);
  assert_true(value("nv_inference_exec_count", "a", NULL, NULL) == 3);
  assert_true(value("nv_inference_request_duration_us", "a", NULL, NULL) == (50000 + 300000 + 7000000000 + 20000) / 1000);
  assert_true(value("nv_inference_queue_duration_us", "a", NULL, NULL) == (1000 + 250000 + 100001) / 1000);
  assert_true(value("nv_inference_compute_input_duration_us", "a", NULL, NULL) == 6);
  assert_true(value("nv_inference_compute_infer_duration_us", "a", NULL, NULL) == 9);
  assert_true(value("nv_inference_compute_output_duration_us", "a", NULL, NULL) == 12);
  assert_true(value("nv_inference_pending_request_count", "a", NULL, NULL) == 3);
  assert_true(value("nv_cache_num_hits_per_model", "a", NULL, NULL) == 1);
  assert_true(value("nv_cache_num_misses_per_model", "a", NULL, NULL) == 2);
  assert_true(value("nv_cache_hit_duration_per_model", "a", NULL, NULL) == 5);
  assert_true(value("nv_cache_miss_duration_per_model", "a", NULL, NULL) == 16);
  assert_true(value("toplu_memory_bytes", "a", NULL, NULL) == 12345);
  assert_true(value("nv_inference_request_success", "we\"ird\\na\nme", NULL, NULL) == 0);
  assert_string_equal(label(&g_p.s[0], "version"), "1");
  assert_string_equal(label(&g_p.s[1], "version"), "2");

  /* request histogram of a: 50 us, 20 us (hit) <= 100; 300 us <= 500; 7 s in +Inf only */
  const char *h = "toplu_inference_request_duration_us_bucket";
  double prev = 0;
  for (size_t k = 0; k < sizeof kBounds / sizeof kBounds[0]; k++) {
    char le[32];
    snprintf(le, sizeof le, "%lld", (long long)kBounds[k]);
    double v = value(h, "a", "le", le);
    assert_true(v >= prev);
    double want = kBounds[k] < 500 ? 2 : 3;
    if (v != want) fail_msg("le=%s: %g, want %g", le, v, want);
    prev = v;
  }
  assert_true(value(h, "a", "le", "+Inf") == 4);
  assert_true(value("toplu_inference_request_duration_us_count", "a", NULL, NULL) == 4);
  assert_true(value("toplu_inference_request_duration_us_sum", "a", NULL, NULL) == 7000370.0);
  /* queue histogram: 1 us <= 100; 250 us and 100.001 us <= 250 (cache hits not included) */
  assert_true(value("toplu_inference_queue_duration_us_bucket", "a", "le", "100") == 1);
  assert_true(value("toplu_inference_queue_duration_us_bucket", "a", "le", "250") == 3);
  assert_true(value("toplu_inference_queue_duration_us_bucket", "a", "le", "+Inf") == 3);
  assert_true(value("toplu_inference_queue_duration_us_count", "a", NULL, NULL) == 3);
  assert_true(value("toplu_inference_queue_duration_us_sum", "a", NULL, NULL) == 351.001);
  /* batch sizes 1, 2, 300 */
  assert_true(value("toplu_inference_batch_size_bucket", "a", "le", "1") == 1);
  assert_true(value("toplu_inference_batch_size_bucket", "a", "le", "2") == 2);
  assert_true(value("toplu_inference_batch_size_bucket", "a", "le", "256") == 2);
  assert_true(value("toplu_inference_batch_size_bucket", "a", "le", "+Inf") == 3);
  assert_true(value("toplu_inference_batch_size_sum", "a", NULL, NULL) == 303);
  assert_true(value("toplu_inference_batch_size_count", "a", NULL, NULL) == 3);
  /* server-wide */
  assert_true(value("toplu_http_responses_total", NULL, "code", "2xx") == 20);
  assert_true(value("toplu_http_responses_total", NULL, "code", "5xx") == 5);
  assert_true(value("toplu_http_responses_status_total", NULL, "code", "404") == 7);
  assert_true(value("toplu_http_responses_status_total", NULL, "code", "400") == 3);
  assert_true(value("toplu_http_responses_status_total", NULL, "code", "503") == 2);
  assert_true(value("toplu_cache_bytes", NULL, NULL, NULL) == 1000);
  assert_true(value("toplu_cache_max_bytes", NULL, NULL, NULL) == 4000);
  assert_true(value("nv_cache_num_entries", NULL, NULL, NULL) == 9);
  assert_true(value("nv_cache_num_evictions", NULL, NULL, NULL) == 11);
  assert_true(value("nv_cache_util", NULL, NULL, NULL) == 0.25);
  assert_true(value("toplu_http_connections", NULL, NULL, NULL) == 6);
  /* the host, with Triton's names */
  assert_string_equal(type_of("nv_cpu_utilization"), "gauge");
  assert_true(value("nv_cpu_utilization", NULL, NULL, NULL) == 0.375);
  assert_true(value("nv_cpu_memory_total_bytes", NULL, NULL, NULL) == 8192);
  assert_true(value("nv_cpu_memory_used_bytes", NULL, NULL, NULL) == 3072);
  /* the escaped label, as written */
  assert_non_null(strstr(out.data, "model=\"we\\\"ird\\\\na\\nme\""));
  pl_buf_free(&out);

  /* No models and no server numbers: families only, still valid. */
  pl_buf_t empty = {0};
  srv_metrics_prometheus(NULL, 0, NULL, &empty);
  parse_text(empty.data, empty.len);
  check_families();
  assert_int_equal(g_p.n, 0);
  assert_string_equal(type_of("nv_inference_count"), "counter");
  pl_buf_free(&empty);
  srv_metrics_destroy(a);
  srv_metrics_destroy(b);
  srv_metrics_destroy(NULL);
}

static json_t *get(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  if (!v) fail_msg("no field %s", k);
  return v;
}

static int64_t dcount(json_t *stats, const char *k) { return json_integer_value(get(get(stats, k), "count")); }
static int64_t dns(json_t *stats, const char *k) { return json_integer_value(get(get(stats, k), "ns")); }

static void test_stats_json(void **state) {
  (void)state;
  srv_metrics_t *a = srv_metrics_create();
  srv_metrics_success(a, 5000, 100, 200, 300, 400);
  srv_metrics_success(a, 6000, 150, 200, 300, 400);
  srv_metrics_cache_hit(a, 700, 70);
  srv_metrics_cache_miss(a, 80);
  srv_metrics_failure(a, SRV_FAIL_BACKEND, 900);
  srv_metrics_batch(a, 2, 200, 300, 400);
  srv_metrics_batch(a, 2, 10, 20, 30);
  srv_metrics_batch(a, 1024, 1, 2, 3);
  srv_metrics_batch(a, 1025, 1, 2, 3); /* beyond the table: counted, not listed */
  srv_metrics_model_t models[2] = {{"cls", "1", a, 0}, {"empty", "3", NULL, 0}};
  pl_buf_t out = {0};
  srv_metrics_stats_json(models, 2, &out);
  json_error_t je;
  json_t *r = json_loadb(out.data, out.len, 0, &je);
  if (!r) fail_msg("not JSON (%s): %.*s", je.text, (int)out.len, out.data);
  json_t *ms = get(r, "model_stats");
  assert_int_equal(json_array_size(ms), 2);
  json_t *m = json_array_get(ms, 0);
  assert_string_equal(json_string_value(get(m, "name")), "cls");
  assert_string_equal(json_string_value(get(m, "version")), "1");
  assert_true(json_integer_value(get(m, "last_inference")) > 1600000000000LL);
  assert_int_equal(json_integer_value(get(m, "inference_count")), 2 + 2 + 1024 + 1025);
  assert_int_equal(json_integer_value(get(m, "execution_count")), 4);
  json_t *is = get(m, "inference_stats");
  assert_int_equal(dcount(is, "success"), 3);
  assert_int_equal(dns(is, "success"), 5000 + 6000 + 700);
  assert_int_equal(dcount(is, "fail"), 1);
  assert_int_equal(dns(is, "fail"), 900);
  assert_int_equal(dcount(is, "queue"), 3); /* Triton counts cache hits in queue */
  assert_int_equal(dns(is, "queue"), 250);
  assert_int_equal(dcount(is, "compute_input"), 2);
  assert_int_equal(dns(is, "compute_input"), 400);
  assert_int_equal(dns(is, "compute_infer"), 600);
  assert_int_equal(dns(is, "compute_output"), 800);
  assert_int_equal(dcount(is, "cache_hit"), 1);
  assert_int_equal(dns(is, "cache_hit"), 70);
  assert_int_equal(dcount(is, "cache_miss"), 1);
  assert_int_equal(dns(is, "cache_miss"), 80);
  json_t *bs = get(m, "batch_stats");
  assert_int_equal(json_array_size(bs), 2);
  json_t *b0 = json_array_get(bs, 0), *b1 = json_array_get(bs, 1);
  assert_int_equal(json_integer_value(get(b0, "batch_size")), 2);
  assert_int_equal(dcount(b0, "compute_infer"), 2);
  assert_int_equal(dns(b0, "compute_input"), 210);
  assert_int_equal(dns(b0, "compute_infer"), 320);
  assert_int_equal(dns(b0, "compute_output"), 430);
  assert_int_equal(json_integer_value(get(b1, "batch_size")), 1024);
  assert_int_equal(dcount(b1, "compute_output"), 1);
  json_t *e = json_array_get(ms, 1);
  assert_string_equal(json_string_value(get(e, "name")), "empty");
  assert_int_equal(json_integer_value(get(e, "last_inference")), 0);
  assert_int_equal(dcount(get(e, "inference_stats"), "success"), 0);
  assert_int_equal(json_array_size(get(e, "batch_stats")), 0);
  json_decref(r);
  pl_buf_free(&out);
  srv_metrics_destroy(a);
}

static void test_fail_reason_names(void **state) {
  (void)state;
  assert_string_equal(srv_fail_reason_name(SRV_FAIL_REJECTED), "REJECTED");
  assert_string_equal(srv_fail_reason_name(SRV_FAIL_CANCELED), "CANCELED");
  assert_string_equal(srv_fail_reason_name(SRV_FAIL_BACKEND), "BACKEND");
  assert_string_equal(srv_fail_reason_name(SRV_FAIL_OTHER), "OTHER");
  assert_string_equal(srv_fail_reason_name(SRV_FAIL_BAD_REQUEST), "BAD_REQUEST");
}

#define N_THREADS 4
#define N_RECORDS 100000

static void *worker(void *arg) {
  srv_metrics_t *m = arg;
  for (int i = 0; i < N_RECORDS; i++) {
    srv_metrics_pending(m, 1);
    srv_metrics_success(m, 1000 * (i % 7), 1000, 1, 2, 3);
    srv_metrics_batch(m, 1 + i % 4, 1, 2, 3);
    if (i % 10 == 0) srv_metrics_failure(m, (srv_fail_reason_t)((i / 10) % SRV_FAIL_COUNT), 5);
    if (i % 3 == 0) srv_metrics_cache_hit(m, 1000, 1);
    srv_metrics_pending(m, -1);
  }
  return NULL;
}

static void test_concurrent(void **state) {
  (void)state;
  srv_metrics_t *m = srv_metrics_create();
  pthread_t t[N_THREADS];
  for (int i = 0; i < N_THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, m), 0);
  for (int i = 0; i < N_THREADS; i++) pthread_join(t[i], NULL);
  srv_metrics_model_t mm = {"c", "1", m, 0};
  pl_buf_t out = {0};
  srv_metrics_prometheus(&mm, 1, NULL, &out);
  parse_text(out.data, out.len);
  int64_t hits = N_THREADS * ((N_RECORDS + 2) / 3), fails = N_THREADS * (N_RECORDS / 10);
  int64_t rows_per_thread = 0, sum_req_us_per_thread = 0;
  for (int i = 0; i < N_RECORDS; i++) rows_per_thread += 1 + i % 4, sum_req_us_per_thread += i % 7;
  assert_true(value("nv_inference_request_success", "c", NULL, NULL) == (double)(N_THREADS * N_RECORDS + hits));
  double f = 0;
  for (int r = 0; r < SRV_FAIL_COUNT; r++) {
    double v = value("nv_inference_request_failure", "c", "reason", srv_fail_reason_name((srv_fail_reason_t)r));
    assert_true(v == (double)(fails / SRV_FAIL_COUNT));
    f += v;
  }
  assert_true(f == (double)fails);
  assert_true(value("nv_inference_exec_count", "c", NULL, NULL) == N_THREADS * N_RECORDS);
  assert_true(value("nv_inference_count", "c", NULL, NULL) == (double)(N_THREADS * rows_per_thread));
  assert_true(value("nv_inference_pending_request_count", "c", NULL, NULL) == 0);
  assert_true(value("nv_inference_request_duration_us", "c", NULL, NULL) ==
              (double)(N_THREADS * sum_req_us_per_thread + hits));
  assert_true(value("toplu_inference_request_duration_us_count", "c", NULL, NULL) ==
              (double)(N_THREADS * N_RECORDS + hits));
  assert_true(value("toplu_inference_batch_size_bucket", "c", "le", "4") == N_THREADS * N_RECORDS);
  assert_true(value("toplu_inference_batch_size_bucket", "c", "le", "2") == N_THREADS * N_RECORDS / 2);
  assert_true(value("nv_cache_num_hits_per_model", "c", NULL, NULL) == (double)hits);
  pl_buf_free(&out);
  srv_metrics_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prometheus),
      cmocka_unit_test(test_stats_json),
      cmocka_unit_test(test_fail_reason_names),
      cmocka_unit_test(test_concurrent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
