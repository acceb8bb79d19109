/*
 * toplu/status.h - status codes and error messages.
 *
 * Every fallible toplu function returns a toplu_status_t.  TOPLU_OK is zero;
 * everything else is an error whose generic meaning toplu_strerror() gives.
 * The specific reason (which file, node, tensor or field, and why) is a
 * message: functions that create a handle fill an optional toplu_error_t,
 * and handles keep the message of their last failed call (for example
 * toplu_session_last_error()).  The library never calls exit() or abort()
 * because of its input.
 */
#ifndef TOPLU_STATUS_H
#define TOPLU_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum toplu_status {
  TOPLU_OK = 0,
  TOPLU_ERR_INVALID_ARGUMENT = 1, /* a caller passed a bad value (NULL, wrong count, bad option) */
  TOPLU_ERR_IO = 2,               /* a file could not be opened, read or written */
  TOPLU_ERR_PARSE = 3,            /* malformed file: truncated, bad protobuf, bad NPY header */
  TOPLU_ERR_INVALID_MODEL = 4,    /* a well-formed file describing an invalid graph */
  TOPLU_ERR_UNSUPPORTED = 5,      /* valid, but an op, opset, attribute or dtype toplu lacks */
  TOPLU_ERR_SHAPE = 6,            /* shapes or dtypes that do not fit together */
  TOPLU_ERR_OUT_OF_MEMORY = 7,    /* an allocation failed or would pass the allocator's limit */
  TOPLU_ERR_NOT_FOUND = 8,        /* a named input, output or entry does not exist */
  TOPLU_ERR_BACKEND = 9,          /* oneDNN (or another backend) refused or failed */
  TOPLU_ERR_INTERNAL = 10,        /* a toplu bug: please report it */
  TOPLU_ERR_CANCELLED = 11,       /* the caller asked the call to stop (a cancel flag, SIGINT) */
  TOPLU_ERR_DEADLINE = 12         /* the call's deadline passed before it finished */
} toplu_status_t;

/* Longest message toplu writes, including the terminating NUL. */
#define TOPLU_ERROR_MESSAGE_MAX 1024

/*
 * A status and its message.  Pass one to functions that create handles to
 * learn why they failed; it may be NULL when the caller only wants the code.
 * message is always NUL-terminated (empty when status is TOPLU_OK).
 */
typedef struct toplu_error {
  toplu_status_t status;
  char message[TOPLU_ERROR_MESSAGE_MAX];
} toplu_error_t;

/* The version of these headers; CMakeLists.txt's project version is checked against it at configure
 * time. */
#define TOPLU_VERSION_STRING "0.1.0"

/* The version of the library linked ("0.1.0"): compare with TOPLU_VERSION_STRING to find a program
 * built against other headers than the libtoplu.so it runs with.  Thread-safe. */
const char *toplu_version(void);

/* Stable upper-case name of a status code ("TOPLU_ERR_DEADLINE"), for logs
 * and JSON; "TOPLU_ERR_UNKNOWN" for unknown codes.  Thread-safe. */
const char *toplu_status_name(toplu_status_t status);

/* Static, human-readable meaning of a status code ("out of memory", ...).
 * Never NULL; unknown codes give "unknown status".  Thread-safe. */
const char *toplu_strerror(toplu_status_t status);

/* Reset an error to TOPLU_OK with an empty message.  NULL is allowed. */
void toplu_error_clear(toplu_error_t *err);

#ifdef __cplusplus
}
#endif
#endif /* TOPLU_STATUS_H */
