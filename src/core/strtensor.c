/* core/strtensor.c - string tensors' storage and UTF-8 case mapping (core/strtensor.h). */
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "strtensor.h"

size_t toplu__strings_block_bytes(const void *data, int64_t n) {
  size_t total;
  if (n < 0 || !toplu__mul_size((size_t)n, sizeof(char *), &total)) return SIZE_MAX;
  for (int64_t k = 0; k < n; k++)
    if (!toplu__add_size(total, strlen(toplu__str_at(data, k)) + 1, &total)) return SIZE_MAX;
  return total;
}

void toplu__strings_pack(void *dst, const void *data, int64_t n) {
  char **ptr = dst;
  char *bytes = (char *)dst + (size_t)n * sizeof(char *);
  for (int64_t k = 0; k < n; k++) { /* data may be dst's own array only when n == 0 */
    const char *s = toplu__str_at(data, k);
    size_t len = strlen(s) + 1;
    memcpy(bytes, s, len);
    ptr[k] = bytes;
    bytes += len;
  }
}

void *toplu__strings_clone(const void *data, int64_t n) {
  size_t bytes = toplu__strings_block_bytes(data, n);
  if (bytes == SIZE_MAX) return NULL;
  void *p = malloc(bytes ? bytes : 1);
  if (p) toplu__strings_pack(p, data, n);
  return p;
}

int toplu__strings_equal(const void *a, const void *b, int64_t n) {
  for (int64_t k = 0; k < n; k++)
    if (strcmp(toplu__str_at(a, k), toplu__str_at(b, k))) return 0;
  return 1;
}

int toplu__tensor_data_equal(const toplu_tensor_t *a, const toplu_tensor_t *b) {
  if (a->data == b->data) return 1;
  if (!a->data || !b->data) return 0;
  if (a->dtype == TOPLU_DTYPE_STRING) return toplu__strings_equal(a->data, b->data, toplu_tensor_numel(a));
  return !memcmp(a->data, b->data, toplu_tensor_nbytes(a));
}

/* ---- case mapping (UTF-8) ---- */

/* Decode one UTF-8 character at s (of 1 to 3 bytes; 4-byte ones are left
 * alone, no mapping touches them): its code point and length, or length 0
 * for a byte that does not start a valid 1..3-byte sequence. */
static int utf8_decode(const unsigned char *s, uint32_t *cp) {
  if (s[0] < 0x80) {
    *cp = s[0];
    return 1;
  }
  if ((s[0] & 0xe0) == 0xc0 && s[0] >= 0xc2 && (s[1] & 0xc0) == 0x80) {
    *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    return 2;
  }
  if ((s[0] & 0xf0) == 0xe0 && (s[1] & 0xc0) == 0x80 && (s[2] & 0xc0) == 0x80) {
    uint32_t c = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    if (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return 3;
  }
  return 0;
}

static int utf8_encode(uint32_t c, char *out) {
  if (c < 0x80) {
    out[0] = (char)c;
    return 1;
  }
  if (c < 0x800) {
    out[0] = (char)(0xc0 | c >> 6);
    out[1] = (char)(0x80 | (c & 0x3f));
    return 2;
  }
  out[0] = (char)(0xe0 | c >> 12);
  out[1] = (char)(0x80 | (c >> 6 & 0x3f));
  out[2] = (char)(0x80 | (c & 0x3f));
  return 3;
}

/* Simple one-to-one case mapping of ASCII, Latin-1, Latin Extended-A, Greek
 * and Cyrillic; other code points map to themselves. */
uint32_t toplu__unicode_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0xc0) return c;
  if (c <= 0xde) return c == 0xd7 ? c : c + 32;
  if (c >= 0x100 && c <= 0x17f) {
    if (c == 0x130) return 'i';
    if (c == 0x178) return 0xff;
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return c & 1 ? c + 1 : c;
    if (c == 0x138 || c == 0x149 || c == 0x17f || c == 0x131) return c;
    return c & 1 ? c : c + 1;
  }
  if (c >= 0x391 && c <= 0x3ab && c != 0x3a2) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c == 0x38e || c == 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}

uint32_t toplu__unicode_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0xb5) return c;
  if (c == 0xb5) return 0x39c;
  if (c == 0xff) return 0x178;
  if (c >= 0xe0 && c <= 0xfe) return c == 0xf7 ? c : c - 32;
  if (c >= 0x100 && c <= 0x17f) {
    if (c == 0x131) return 'I';
    if (c == 0x17f) return 'S';
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e)) return c & 1 ? c : c - 1;
    if (c == 0x138 || c == 0x149 || c == 0x130 || c == 0x178) return c;
    return c & 1 ? c - 1 : c;
  }
  if (c >= 0x3b1 && c <= 0x3cb) return c == 0x3c2 ? 0x3a3 : c - 32;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c == 0x3cd || c == 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}

/* Write s with every character mapped by fn at out (room for strlen(s) + 1:
 * no mapping above makes a character longer); returns the bytes written,
 * NUL included. */
size_t toplu__utf8_map_case(const char *s, uint32_t (*fn)(uint32_t), char *out) {
  const unsigned char *u = (const unsigned char *)s;
  size_t o = 0;
  while (*u) {
    uint32_t c;
    int len = utf8_decode(u, &c);
    if (!len) { /* not UTF-8 (or a 4-byte character): the byte as it is */
      out[o++] = (char)*u++;
      continue;
    }
    o += (size_t)utf8_encode(fn(c), out + o);
    u += len;
  }
  out[o++] = '\0';
  return o;
}

/* Strings a and b equal with both mapped to lower case. */
int toplu__utf8_equal_nocase(const char *a, const char *b) {
  const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
  while (*x && *y) {
    uint32_t cx, cy;
    int lx = utf8_decode(x, &cx), ly = utf8_decode(y, &cy);
    if (!lx) cx = 0x110000u + *x, lx = 1; /* raw bytes compare as themselves */
    if (!ly) cy = 0x110000u + *y, ly = 1;
    if ((cx < 0x110000u ? toplu__unicode_lower(cx) : cx) != (cy < 0x110000u ? toplu__unicode_lower(cy) : cy)) return 0;
    x += lx;
    y += ly;
  }
  return !*x && !*y;
}

