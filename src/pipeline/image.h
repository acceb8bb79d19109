/*
 * pipeline/image.h - decoding JPEG (libturbojpeg) and PNG (libpng) files.
 *
 * The format is taken from the file's first bytes, not its name.  Results
 * are 8-bit, row-major HWC, with 1 channel (grayscale files) or 3 (RGB):
 * 16-bit samples are scaled to 8 bits (rounded), palettes expanded, alpha
 * dropped (the colour values are kept as stored, as PIL's convert('RGB')
 * and OpenCV do), CMYK JPEGs converted to RGB.  A JPEG may be decoded at
 * 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling) when the result stays at
 * least hint_w x hint_h.  Any decoder warning (a truncated file, a bad
 * Huffman code) makes the file corrupt, except JPEG's "extraneous bytes
 * before marker", which real cameras write.  Thread-safe.
 */
#ifndef TOPLU_PIPELINE_IMAGE_H
#define TOPLU_PIPELINE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/chunk.h"

/* Pixels (width x height, as the file's header declares them) an image may
 * have when the caller gives 0: 2^28 (16384 x 16384), 768 MiB decoded as
 * RGB.  A header declaring more is refused before anything is decoded, so a
 * small file claiming a huge image (a decompression bomb) costs nothing. */
#define PL_IMAGE_MAX_PIXELS_DEFAULT (INT64_C(1) << 28)

/* Decode an image file held in memory into v (kind PL_VALUE_IMAGE).
 * max_pixels: the most width x height the header may declare (0: the
 * default above).  Returns 0, or -1 with the reason in why ("not a JPEG or
 * PNG file", "image of 60000x60000 pixels is above the limit ...",
 * libjpeg's or libpng's message, prefixed "corrupt" only when the file is). */
int pl_image_decode(const uint8_t *data, size_t len, int hint_w, int hint_h, int64_t max_pixels, pl_value_t *v,
                    char *why, size_t why_size);

/* Read and decode a file (a regular file; at most 2 GiB); 0 or -1 with the reason in why. */
int pl_image_load(const char *path, int hint_w, int hint_h, int64_t max_pixels, pl_value_t *v, char *why,
                  size_t why_size);

#endif
