/*
 * serve/perf_priv.h - pieces of toplu perf (include/toplu/perf.h) shared
 * between src/serve/perf.c (the sweep), src/serve/perf_data.c (the request
 * bodies) and src/serve/perf_plot.c (the PNG plot).
 *
 * Internal: not installed, names with the srv_perf_ prefix.  Nothing here
 * keeps global state; every function is thread-safe on distinct arguments.
 */
#ifndef TOPLU_SERVE_PERF_PRIV_H
#define TOPLU_SERVE_PERF_PRIV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pipeline/buf.h"
#include "toplu/perf.h"

/* One model input as the server's metadata describes it, and the shape the
 * requests give it. */
typedef struct srv_perf_input {
  char *name;
  toplu_dtype_t dtype;           /* TOPLU_DTYPE_STRING for BYTES */
  char datatype[16];             /* the protocol's name ("FP32") */
  int ndim;                      /* metadata rank */
  int64_t meta_dims[TOPLU_MAX_DIMS]; /* metadata dims, -1 for variable */
  int req_ndim;                  /* request rank (batch dim included when batching) */
  int64_t req_dims[TOPLU_MAX_DIMS];
  int64_t unit_numel;            /* elements of one batch row (of the whole tensor without batching) */
} srv_perf_input_t;

/* One prebuilt request body with its headers. */
typedef struct srv_perf_body {
  pl_buf_t body;
  size_t json_len;               /* Inference-Header-Content-Length when binary (< body.len), else body.len */
} srv_perf_body_t;

/*
 * Build the request bodies for inputs (n of them, request shapes set):
 * data "random"/NULL, "zero", a .npy path, a perf_analyzer JSON path or
 * a perf_analyzer input-data directory (one file per input, named as it:
 * one request's raw bytes, or a BYTES input's strings one per line);
 * batching: the model batches (unit data repeated batch times along dim 0).
 * *bodies gets *n_bodies bodies (free with srv_perf_bodies_free).  Returns
 * a status with err naming the input or file.
 */
toplu_status_t srv_perf_build_bodies(const srv_perf_input_t *inputs, int n, int batching, int64_t batch,
                                     const char *data, int json_input, int json_output, uint64_t seed,
                                     srv_perf_body_t **bodies, int *n_bodies, toplu_error_t *err);

/* Free n bodies and the array.  NULL-safe. */
void srv_perf_bodies_free(srv_perf_body_t *bodies, int n);

/* ---- HTTP/1.1 client connections (perf_http.c) ------------------------ */

/* A server address, resolved once. */
typedef struct srv_http_addr {
  struct sockaddr_storage addr;
  socklen_t len;
} srv_http_addr_t;

/* One keep-alive connection carrying one request at a time.  Zero it and
 * set fd = -1 and body_max before the first srv_http_start. */
typedef struct srv_http_conn {
  int fd;                        /* -1: no socket */
  int connected;                 /* fd is a usable connection */
  int fresh;                     /* fd was opened since the caller last cleared this (register it) */
  int reused;                    /* this request went out on a connection that served one before */
  const char *out;               /* the request bytes (not owned) */
  size_t out_len, out_off;
  pl_buf_t in;                   /* received bytes not yet taken */
  size_t parsed;                 /* bytes of in already taken */
  pl_buf_t body;                 /* the response body, up to body_max bytes */
  size_t body_max;
  uint64_t body_seen;            /* body bytes so far (Content-Length bodies) */
  int head_done, status, chunked, close_after, got_bytes;
  int errno_at_fail;             /* the caller's record of why a request failed (0 none) */
  int64_t content_length;        /* -1: none given */
  int64_t chunk_left;            /* chunk parser state */
} srv_http_conn_t;

/* Resolve host:port and pick the first address that accepts a blocking
 * connection.  TOPLU_ERR_IO naming host:port when none does. */
toplu_status_t srv_http_resolve(const char *host, const char *port, srv_http_addr_t *a, toplu_error_t *err);

/* Send req[0..len) (a whole HTTP/1.1 request, kept alive by the caller
 * until the response) on c, opening a non-blocking connection to a when c
 * has none.  1: all sent; 0: the rest waits for POLLOUT (srv_http_send);
 * -1: failed (errno). */
int srv_http_start(srv_http_conn_t *c, const srv_http_addr_t *a, const char *req, size_t len);

/* Send more of the request.  1 all sent, 0 would block, -1 failed. */
int srv_http_send(srv_http_conn_t *c);

/* Read what the socket has.  1: the response is complete (c->status,
 * c->body, c->close_after: the server will close); 0: more to come;
 * -1 with errno: EPROTO a malformed response, ECONNRESET closed before
 * the response was complete, ENOMEM, or the socket's error. */
int srv_http_recv(srv_http_conn_t *c);

/* Close c's socket (c can start again); free also releases its buffers. */
void srv_http_close(srv_http_conn_t *c);
void srv_http_free(srv_http_conn_t *c);

/* xorshift64* step: the next 64 random bits of state *s (never 0). */
uint64_t srv_perf_rand(uint64_t *s);

/* 1 when path names a .npy file (by its suffix; NULL: 0). */
int srv_perf_is_npy(const char *path);

/* 1 when path names a directory (perf_analyzer's input-data directory; NULL: 0). */
int srv_perf_is_dir(const char *path);

#endif
