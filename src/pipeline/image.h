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

/* Decode an image file held in memory into v (kind PL_VALUE_IMAGE).
 * Returns 0, or -1 with the reason in why ("not a JPEG or PNG file",
 * libjpeg's or libpng's message). */
int pl_image_decode(const uint8_t *data, size_t len, int hint_w, int hint_h, pl_value_t *v, char *why,
                    size_t why_size);

/* Read and decode a file; 0 or -1 with the reason in why. */
int pl_image_load(const char *path, int hint_w, int hint_h, pl_value_t *v, char *why, size_t why_size);

#endif
