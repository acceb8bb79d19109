/* ops/registry.c - kernel lookup, the list of backends, kernel-side helpers. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/backend.h"
#include "ops/kernel.h"

static int kernel_is(const toplu__kernel_t *k, const char *domain, const char *op_type) {
  return !strcmp(k->op_type, op_type) && !strcmp(k->domain ? k->domain : "", domain);
}

const toplu__kernel_t *toplu__kernel_find(const char *domain, const char *op_type) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  for (const toplu__kernel_t *const *f = toplu__backend_cpu.families; *f; f++)
    for (const toplu__kernel_t *k = *f; k->op_type; k++)
      if (!(k->flags & (TOPLU_KERNEL_BLOCKED_ALT | TOPLU_KERNEL_SPECIALISED)) && kernel_is(k, domain, op_type)) return k;
  return NULL;
}

int toplu__backend_candidates(const toplu__backend_t *b, const char *domain, const char *op_type,
                             const toplu__kernel_t **out, int cap) {
  if (!domain || !strcmp(domain, "ai.onnx")) domain = "";
  int n = 0;
  for (const toplu__kernel_t *const *f = b->iface->families; *f; f++)
    for (const toplu__kernel_t *k = *f; k->op_type; k++)
      if (kernel_is(k, domain, op_type)) {
        if (n < cap) out[n] = k;
        n++;
      }
  return n;
}

/* ---- backends ---- */

static const toplu__backend_iface_t *const ifaces[] = {&toplu__backend_cpu, &toplu__backend_reference};

const toplu__backend_iface_t *toplu__backend_iface_find(const char *name) {
  if (!strcmp(name, "onednn")) name = "cpu";
  for (size_t i = 0; i < sizeof ifaces / sizeof ifaces[0]; i++)
    if (!strcmp(ifaces[i]->name, name)) return ifaces[i];
  return NULL;
}

static char names_text[256];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_init(void) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof ifaces / sizeof ifaces[0] && n < sizeof names_text; i++) {
    int w = snprintf(names_text + n, sizeof names_text - n, "%s%s%s", i ? ", " : "", ifaces[i]->name,
                     ifaces[i] == &toplu__backend_cpu ? " (also called onednn)" : "");
    if (w < 0) break;
    n += (size_t)w;
  }
}

const char *toplu__backend_names(void) {
  pthread_once(&names_once, names_init);
  return names_text;
}

toplu_status_t toplu__backend_create_iface(const toplu__backend_iface_t *iface, const char *ops, toplu__backend_t **out,
                                          toplu_error_t *err) {
  *out = NULL;
  toplu__backend_t *b = calloc(1, sizeof *b);
  if (!b) return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory creating backend '%s'", iface->name);
  b->iface = iface;
  if (ops && *ops) {
    size_t n = strlen(ops) + 1;
    if (!(b->ops = malloc(n))) {
      free(b);
      return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory creating backend '%s'", iface->name);
    }
    memcpy(b->ops, ops, n);
  }
  toplu_status_t st = iface->init ? iface->init(b, err) : TOPLU_OK;
  if (st) {
    free(b->ops);
    free(b);
    return st;
  }
  *out = b;
  return TOPLU_OK;
}

void toplu__backend_free(toplu__backend_t *b) {
  if (!b) return;
  if (b->iface->fini) b->iface->fini(b);
  free(b->ops);
  free(b);
}

toplu_status_t toplu__backend_host_copy(toplu__backend_t *b, void *dst, const void *src, size_t bytes, void *stream) {
  (void)b;
  (void)stream;
  if (bytes) memcpy(dst, src, bytes);
  return TOPLU_OK;
}

int toplu__backend_takes(const toplu__backend_t *b, const char *op_type) {
  if (!b->ops) return 1;
  size_t n = strlen(op_type);
  for (const char *p = b->ops; *p;) {
    const char *e = p;
    while (*e && *e != '+') e++;
    if ((size_t)(e - p) == n && !strncmp(p, op_type, n)) return 1;
    p = *e ? e + 1 : e;
  }
  return 0;
}

void toplu__backends_destroy(toplu__backend_t **b, int n) {
  if (!b) return;
  for (int i = 0; i < n; i++) toplu__backend_free(b[i]);
  free(b);
}

toplu_status_t toplu__backends_create(const char *list, toplu__backend_t ***out, int *n_out, toplu_error_t *err) {
  *out = NULL;
  *n_out = 0;
  if (!list || !*list) list = "cpu";
  size_t len = strlen(list);
  int cap = 2;
  for (size_t i = 0; i < len; i++) cap += list[i] == ',';
  toplu__backend_t **b = calloc((size_t)cap, sizeof *b);
  char *copy = malloc(len + 1);
  if (!b || !copy) {
    free(b);
    free(copy);
    return toplu__errorf(err, TOPLU_ERR_OUT_OF_MEMORY, "out of memory creating backends");
  }
  memcpy(copy, list, len + 1);
  int n = 0, have_cpu = 0;
  toplu_status_t st = TOPLU_OK;
  for (char *tok = copy, *next; tok && !st; tok = next) {
    next = strchr(tok, ',');
    if (next) *next++ = '\0';
    while (*tok == ' ') tok++;
    for (size_t l = strlen(tok); l > 0 && tok[l - 1] == ' '; l--) tok[l - 1] = '\0';
    char *ops = strchr(tok, ':');
    if (ops) *ops++ = '\0';
    const toplu__backend_iface_t *iface = *tok ? toplu__backend_iface_find(tok) : NULL;
    if (!iface) {
      st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "backends: %s%s%s in \"%s\" (known: %s)",
                        *tok ? "unknown backend '" : "an empty backend name", tok, *tok ? "'" : "", list,
                        toplu__backend_names());
      break;
    }
    for (int k = 0; k < n && !st; k++) {
      if (b[k]->iface == iface && (!b[k]->ops || !ops))
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT, "backends: '%s' is listed twice in \"%s\"", tok, list);
      else if (b[k]->iface != iface && iface->device != TOPLU_DEVICE_HOST && b[k]->iface->device == iface->device)
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "backends: '%s' and '%s' both claim memory device %d (each backend with memory of its own "
                          "needs its own id)", b[k]->iface->name, iface->name, iface->device);
    }
    if (st) break;
    if (ops) {
      /* every op named must be one the backend has a kernel for */
      if (!*ops) {
        st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                          "backends: '%s:' names no op types in \"%s\" (leave out the ':' for every op)", tok, list);
        break;
      }
      toplu__backend_t probe = {.iface = iface};
      for (const char *p = ops; *p && !st;) {
        const char *e = p;
        while (*e && *e != '+') e++;
        char op[64];
        size_t l = (size_t)(e - p) < sizeof op - 1 ? (size_t)(e - p) : sizeof op - 1;
        memcpy(op, p, l);
        op[l] = '\0';
        if (!l || !toplu__backend_candidates(&probe, "", op, NULL, 0))
          st = toplu__errorf(err, TOPLU_ERR_INVALID_ARGUMENT,
                            "backends: backend '%s' has no kernel for op type '%s' (in \"%s\")", tok, op, list);
        p = *e ? e + 1 : e;
      }
      if (st) break;
    }
    if (iface == &toplu__backend_cpu && !ops) have_cpu = 1;
    st = toplu__backend_create_iface(iface, ops, &b[n], err);
    if (!st) n++;
  }
  if (!st && !have_cpu && (st = toplu__backend_create_iface(&toplu__backend_cpu, NULL, &b[n], err)) == TOPLU_OK) n++;
  free(copy);
  if (st) {
    toplu__backends_destroy(b, n);
    return st;
  }
  *out = b;
  *n_out = n;
  return TOPLU_OK;
}

void *toplu__kernel_alloc(toplu__kernel_ctx_t *ctx, size_t bytes) { return toplu_allocator_alloc(ctx->alloc, bytes); }

void toplu__kernel_free(toplu__kernel_ctx_t *ctx, void *p) { toplu_allocator_free(ctx->alloc, p); }

toplu_status_t toplu__kernel_error(toplu__kernel_ctx_t *ctx, toplu_status_t st, const char *fmt, ...) {
  char msg[768], what[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return toplu__errorf(ctx->err, st, "%s: %s: %s", ctx->graph && ctx->graph->path ? ctx->graph->path : "<model>",
                      toplu__node_describe(ctx->graph, ctx->node, what, sizeof what), msg);
}
