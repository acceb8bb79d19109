/* core/file.h - the file-reading pieces every reader shares (the ONNX
 * loader, the pipeline's sources, labels and outputs).
 *
 * toplu reads only regular files: a FIFO, device or socket named as a
 * model, an input or an output would block or never end.  Each reader
 * opens with O_NONBLOCK, checks fstat's mode and names what it found with
 * toplu__file_kind; whole reads go through toplu__pread_full.
 * Thread-safe (no state).
 */
#ifndef TOPLU_CORE_FILE_H
#define TOPLU_CORE_FILE_H

#include <errno.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* What a stat mode is, for a message: "a FIFO", "a character device",
 * "a block device", "a socket", "a directory", else "not a regular file". */
static inline const char *toplu__file_kind(unsigned mode) {
  return S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : S_ISSOCK(mode) ? "a socket" : S_ISDIR(mode) ? "a directory" : "not a regular file";
}

/* Read n bytes at offset off of fd into buf, retrying on EINTR and short
 * reads.  Returns n; fewer when the file ends first (it is shorter than
 * it was said to be); -1 with errno on a read error. */
static inline ssize_t toplu__pread_full(int fd, void *buf, size_t n, off_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (unsigned char *)buf + got, n - got, off + (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

#endif
