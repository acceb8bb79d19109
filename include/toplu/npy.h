/*
 * toplu/npy.h - NumPy .npy files.
 *
 * Reads and writes the NPY format (versions 1.0, 2.0 and 3.0 on read, 1.0 or
 * 2.0 on write as the header needs), little- or big-endian on read,
 * C order only for float32, float16, float64, uint8, int8, uint16, int16,
 * uint32, int32, uint64, int64 and bool, any rank up to TOPLU_MAX_DIMS
 * (scalars included).  Files are written exactly as numpy.save writes them
 * (header padded to a multiple of 64 bytes, ending in '\n'), little-endian.
 * Bool data is read as 0/1.
 * Format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
 */
#ifndef TOPLU_NPY_H
#define TOPLU_NPY_H

#include <stdint.h>
#include <stdio.h>

#include "toplu/status.h"
#include "toplu/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Read a whole .npy file into t (data allocated as by toplu_tensor_alloc;
 * free with toplu_tensor_free).  Big-endian data is converted.
 * Errors: TOPLU_ERR_IO (cannot open/read), TOPLU_ERR_PARSE (bad magic,
 * malformed header dict, missing or unknown keys, data shorter or longer
 * than the header's shape needs: the message says how many bytes are
 * missing or extra; a shape whose non-zero dims multiply past
 * TOPLU_MAX_ELEMENTS, even with a zero dim), TOPLU_ERR_UNSUPPORTED (a dtype toplu lacks, structured
 * dtypes, rank above TOPLU_MAX_DIMS, fortran_order True, format versions
 * other than 1.0/2.0/3.0), TOPLU_ERR_OUT_OF_MEMORY.  err names the file and
 * the reason.  Thread-safe.
 */
toplu_status_t toplu_npy_read(const char *path, toplu_tensor_t *t, toplu_error_t *err);

/* Read only the header: dtype and shape, data left NULL; *data_offset (may be
 * NULL) gets the byte offset of the data.  Same errors as toplu_npy_read,
 * and TOPLU_ERR_PARSE when the file is shorter than the header promises. */
toplu_status_t toplu_npy_read_header(const char *path, toplu_tensor_t *t, long *data_offset,
                                     toplu_error_t *err);

/*
 * Read rows [first, first + count) along dim 0 of the file at path (rank >= 1)
 * into dst, which holds dst_size bytes (at least count * the bytes of one
 * row); big-endian data is converted.  For streaming readers (batch jobs):
 * the header is parsed and the file's length checked on every call.  Errors
 * as toplu_npy_read, and TOPLU_ERR_INVALID_ARGUMENT for a scalar file, rows
 * out of range or a buffer too small.  Thread-safe.
 */
toplu_status_t toplu_npy_read_rows(const char *path, int64_t first, int64_t count, void *dst, size_t dst_size,
                                   toplu_error_t *err);

/* Write t to path (little-endian, C order); a failed write removes the file.  Errors: TOPLU_ERR_IO,
 * TOPLU_ERR_UNSUPPORTED (dtype).  Thread-safe. */
toplu_status_t toplu_npy_write(const char *path, const toplu_tensor_t *t, toplu_error_t *err);

/* Write the header for a tensor of dtype/shape to f; then the caller writes
 * numel*size bytes of little-endian data.  For streaming writers (batch
 * jobs).  The header's length does not depend on dims[0] (numpy's growth
 * padding), so a writer may rewrite it in place once dim 0 is known.
 * Errors: TOPLU_ERR_IO, TOPLU_ERR_UNSUPPORTED (dtype),
 * TOPLU_ERR_INVALID_ARGUMENT (rank or negative dims). */
toplu_status_t toplu_npy_write_header(FILE *f, toplu_dtype_t dtype, int ndim, const int64_t *dims,
                                      toplu_error_t *err);

/* The file name toplu writes a tensor's .npy under: its name with every
 * character outside A-Za-z0-9._- replaced by '_' (always NUL-terminated,
 * truncated to size; a NULL name gives "", a NULL buf or size 0 writes
 * nothing).  Thread-safe. */
void toplu_npy_file_stem(const char *tensor_name, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_NPY_H */
