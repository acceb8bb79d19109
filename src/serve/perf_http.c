/*
 * serve/perf_http.c - the HTTP/1.1 client connections of toplu perf's load
 * loop (perf_priv.h): a non-blocking socket per connection, a request sent
 * whole from one prebuilt buffer (status line, headers and body in one
 * send(2) where the socket takes it), and an incremental response parser
 * (RFC 9112: status line, header fields, a Content-Length or chunked body,
 * keep-alive unless "Connection: close").
 *
 * Why not libcurl here: measured against wrk on the same server (docs/
 * performance.md, "toplu perf against wrk"), libcurl's upload path made 3
 * sendto and 8 poll calls per 110 KiB binary request, wrk 1 write, and the
 * server, sharing the cores with the client, served libcurl's requests
 * 9-17% slower.  A load generator must cost the server no more than the
 * traffic it models, so the hot path is these ~300 lines; the one-off
 * metadata requests stay on libcurl (perf.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "serve/perf_priv.h"

/* Limits on what a server may send before its body: a status line and
 * header block over 64 KiB is refused, as libmicrohttpd and nginx refuse
 * requests' headers over a few tens of KiB. */
#define HEAD_MAX (64 * 1024)

toplu_status_t srv_http_resolve(const char *host, const char *port, srv_http_addr_t *a, toplu_error_t *err) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, port, &hints, &res);
  if (rc) return toplu__errorf(err, TOPLU_ERR_IO, "%s:%s: %s", host, port, gai_strerror(rc));
  /* The first address that accepts a connection (localhost may give ::1
   * first to a server that listens on IPv4 only). */
  toplu_status_t st = toplu__errorf(err, TOPLU_ERR_IO, "cannot reach the server at %s:%s", host, port);
  for (struct addrinfo *p = res; p; p = p->ai_next) {
    if (p->ai_addrlen > sizeof a->addr) continue;
    int fd = socket(p->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int ok = connect(fd, p->ai_addr, p->ai_addrlen) == 0;
    int e = errno;
    close(fd);
    if (ok) {
      memcpy(&a->addr, p->ai_addr, p->ai_addrlen);
      a->len = p->ai_addrlen;
      toplu_error_clear(err);
      st = TOPLU_OK;
      break;
    }
    st = toplu__errorf(err, TOPLU_ERR_IO, "cannot reach the server at %s:%s: %s", host, port, strerror(e));
  }
  freeaddrinfo(res);
  return st;
}

void srv_http_close(srv_http_conn_t *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->connected = 0;
}

void srv_http_free(srv_http_conn_t *c) {
  srv_http_close(c);
  pl_buf_free(&c->in);
  pl_buf_free(&c->body);
}

/* A fresh non-blocking connection to a; 0 or -1 with errno. */
static int open_conn(srv_http_conn_t *c, const srv_http_addr_t *a) {
  int fd = socket(((const struct sockaddr *)&a->addr)->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* Room for a whole request body in the socket, so that one send(2)
   * takes it (the kernel caps this at net.core.wmem_max). */
  int sz = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  if (connect(fd, (const struct sockaddr *)&a->addr, a->len) && errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  c->fd = fd;
  c->connected = 1;
  c->fresh = 1;
  c->reused = 0;
  return 0;
}

int srv_http_start(srv_http_conn_t *c, const srv_http_addr_t *a, const char *req, size_t len) {
  if (c->fd >= 0 && c->connected)
    c->reused = 1;
  else if (open_conn(c, a))
    return -1;
  c->out = req;
  c->out_len = len;
  c->out_off = 0;
  c->in.len = 0;
  c->body.len = 0;
  c->parsed = 0;
  c->head_done = 0;
  c->status = 0;
  c->content_length = -1;
  c->chunked = 0;
  c->chunk_left = -1;
  c->close_after = 0;
  c->got_bytes = 0;
  c->body_seen = 0;
  return srv_http_send(c);
}

int srv_http_send(srv_http_conn_t *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n > 0) {
      c->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1;
  }
  return 1;
}

/* The header block in[0..end): the status code, Content-Length,
 * Transfer-Encoding and Connection.  0, or -1 for a malformed head. */
static int parse_head(srv_http_conn_t *c, const char *p, size_t end) {
  if (end < 12 || strncmp(p, "HTTP/1.", 7)) return -1;
  if (p[8] != ' ' || p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9') return -1;
  c->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
  if (p[7] == '0') c->close_after = 1; /* HTTP/1.0: close unless keep-alive */
  const char *line = memchr(p, '\n', end);
  while (line && (size_t)(line + 1 - p) < end) {
    line++;
    const char *eol = memchr(line, '\n', end - (size_t)(line - p));
    if (!eol) break;
    size_t ll = (size_t)(eol - line);
    if (ll && line[ll - 1] == '\r') ll--;
    const char *colon = memchr(line, ':', ll);
    if (colon) {
      size_t kl = (size_t)(colon - line);
      const char *v = colon + 1;
      while (v < line + ll && (*v == ' ' || *v == '\t')) v++;
      size_t vl = (size_t)(line + ll - v);
      if (kl == 14 && !strncasecmp(line, "Content-Length", 14)) {
        char num[32];
        if (!vl || vl >= sizeof num) return -1;
        memcpy(num, v, vl);
        num[vl] = 0;
        char *q;
        long long n = strtoll(num, &q, 10);
        if (*q || n < 0) return -1;
        c->content_length = n;
      } else if (kl == 17 && !strncasecmp(line, "Transfer-Encoding", 17)) {
        c->chunked = vl >= 7 && !strncasecmp(v + vl - 7, "chunked", 7);
      } else if (kl == 10 && !strncasecmp(line, "Connection", 10)) {
        if (vl == 5 && !strncasecmp(v, "close", 5)) c->close_after = 1;
        if (vl == 10 && !strncasecmp(v, "keep-alive", 10)) c->close_after = 0;
      }
    }
    line = eol;
  }
  return 0;
}

/* Keep up to body_max bytes of the body. */
static void keep(srv_http_conn_t *c, const char *p, size_t n) {
  size_t room = c->body.len < c->body_max ? c->body_max - c->body.len : 0;
  if (n > room) n = room;
  if (n) pl_buf_append(&c->body, p, n);
}

/* Decode the chunked body in in[parsed..len) into body.  1 when the last
 * chunk and the trailer are in, 0 for more, -1 malformed. */
static int parse_chunks(srv_http_conn_t *c) {
  for (;;) {
    const char *p = c->in.data + c->parsed;
    size_t have = c->in.len - c->parsed;
    if (c->chunk_left > 0) {
      size_t take = have < (size_t)c->chunk_left ? have : (size_t)c->chunk_left;
      keep(c, p, take);
      c->parsed += take;
      c->chunk_left -= (int64_t)take;
      if (c->chunk_left > 0) return 0;
      c->chunk_left = -2; /* the CRLF after the data */
      continue;
    }
    const char *eol = memchr(p, '\n', have);
    if (!eol) return have > 1024 ? -1 : 0;
    size_t ll = (size_t)(eol - p);
    if (c->chunk_left == -2) { /* the data's CRLF */
      if (ll > 1) return -1;
      c->parsed += ll + 1;
      c->chunk_left = -1;
      continue;
    }
    if (c->chunk_left == -3) { /* trailer lines until an empty one */
      c->parsed += ll + 1;
      if (ll == 0 || (ll == 1 && p[0] == '\r')) return c->parsed == c->in.len ? 1 : -1;
      continue;
    }
    char *q;
    unsigned long long n = strtoull(p, &q, 16);
    if (q == p || n > (1ull << 40)) return -1;
    c->parsed += ll + 1;
    c->chunk_left = n ? (int64_t)n : -3;
  }
}

/* Drop in[0..parsed), the bytes already taken. */
static void compact(srv_http_conn_t *c) {
  if (c->parsed && c->parsed < c->in.len) memmove(c->in.data, c->in.data + c->parsed, c->in.len - c->parsed);
  c->in.len -= c->parsed;
  c->parsed = 0;
}

/* Take what in holds: the head, then the body.  1 complete, 0 more to
 * come, -1 with errno set. */
static int parse_more(srv_http_conn_t *c) {
  while (!c->head_done) {
    const char *p = c->in.data;
    size_t from = c->parsed > 3 ? c->parsed - 3 : 0;
    size_t end = 0;
    for (size_t i = from; i + 3 < c->in.len && !end; i++)
      if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') end = i + 4;
    if (!end) {
      c->parsed = c->in.len;
      return c->in.len > HEAD_MAX ? (errno = EPROTO, -1) : 0;
    }
    c->content_length = -1;
    c->chunked = 0;
    if (parse_head(c, p, end)) return errno = EPROTO, -1;
    c->parsed = end;
    compact(c);
    if (c->status < 200) continue; /* an interim response (1xx): the real one follows */
    c->head_done = 1;
    if (c->status == 204 || c->status == 304) c->content_length = 0;
  }
  if (c->chunked) {
    int r = parse_chunks(c);
    compact(c);
    if (r < 0) errno = EPROTO;
    return r;
  }
  if (c->content_length >= 0) {
    uint64_t want = (uint64_t)c->content_length - c->body_seen;
    size_t take = c->in.len < want ? c->in.len : (size_t)want;
    keep(c, c->in.data, take);
    c->body_seen += take;
    if (c->in.len > take) return errno = EPROTO, -1; /* bytes beyond the response: nothing was pipelined */
    c->in.len = 0;
    return c->body_seen == (uint64_t)c->content_length;
  }
  keep(c, c->in.data, c->in.len); /* a body that ends when the server closes */
  c->in.len = 0;
  return 0;
}

int srv_http_recv(srv_http_conn_t *c) {
  for (;;) {
    if (pl_buf_reserve(&c->in, c->in.len + 65536)) return errno = ENOMEM, -1;
    ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n < 0) return -1;
    if (n == 0) {
      /* Closed: the end of a body without a length, else an error. */
      if (c->head_done && !c->chunked && c->content_length < 0) {
        c->close_after = 1;
        return 1;
      }
      errno = ECONNRESET;
      return -1;
    }
    c->got_bytes = 1;
    c->in.len += (size_t)n;
    int r = parse_more(c);
    if (r) return r;
  }
}
