/* cgrt: status codes, per-thread error messages, and the host's log callback.
 *
 * Every cgrt function that can fail returns a cgrt_status. On failure the calling
 * thread's detailed message (what failed, with which sizes, which driver call and
 * CUresult) is available from cgrt_last_error() until that thread's next failing cgrt
 * call. cgrt never aborts, exits or prints: diagnostics go to the log callback, which
 * is silent by default. */
#ifndef CGRT_STATUS_H
#define CGRT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, value, "static message") — the single list every status comes from. */
#define CGRT_STATUS_MAP(X)                                                                    \
  X(SUCCESS, 0, "success")                                                                    \
  X(ERROR_INVALID_ARGUMENT, 1, "invalid argument")                                            \
  X(ERROR_INVALID_HANDLE, 2, "handle is null, destroyed or was never created")                 \
  X(ERROR_NO_DRIVER, 3, "no usable CUDA driver (libcuda.so.1 missing or too old)")            \
  X(ERROR_NO_DEVICE, 4, "no CUDA device at the requested ordinal")                            \
  X(ERROR_UNSUPPORTED_DEVICE, 5, "the device cannot run cgrt's embedded kernels")             \
  X(ERROR_OUT_OF_MEMORY, 6, "out of device or host memory")                                   \
  X(ERROR_DRIVER, 7, "a CUDA driver call failed")                                             \
  X(ERROR_WORKSPACE_LOCKED, 8, "request exceeds a reservation that is locked")                \
  X(ERROR_GUARD_CORRUPTED, 9, "a workspace guard word was overwritten")                       \
  X(ERROR_COUNTERS_DIRTY, 10, "a multi-CTA counter was left non-zero")                        \
  X(ERROR_CAPTURING, 11, "operation not allowed while a graph is being captured")              \
  X(ERROR_CAPTURE_FAILED, 12, "graph capture failed; the partial graph was discarded")        \
  X(ERROR_NO_BUCKET, 13, "batch is larger than every captured graph")                          \
  X(ERROR_STALE_POINTER, 14, "a graph node points outside every live allocation")             \
  X(ERROR_CALLBACK_FAILED, 15, "a host callback returned an error")                           \
  X(ERROR_NOT_SUPPORTED, 16, "not supported by this driver, device or configuration")         \
  X(ERROR_INTERNAL, 17, "internal error in cgrt")

typedef enum cgrt_status {
#define CGRT__STATUS_ENUM(name, value, msg) CGRT_##name = value,
  CGRT_STATUS_MAP(CGRT__STATUS_ENUM)
#undef CGRT__STATUS_ENUM
} cgrt_status;

/* "CGRT_ERROR_WORKSPACE_LOCKED"; "CGRT_STATUS_UNKNOWN" for a value not in the list.
 * Static string. Thread-safe; may be called during capture. */
const char *cgrt_status_name(cgrt_status status);

/* The static one-line meaning of a status ("request exceeds a reservation that is
 * locked"). Thread-safe; may be called during capture. */
const char *cgrt_status_string(cgrt_status status);

/* The detailed message of the calling thread's last failing cgrt call, e.g.
 * "workspace 'mla.partials' (lane 0) is locked: requested 4194304 bytes for buffer 1,
 * reserved 2097152". Context added by cgrt layers goes in front ("<context>: <inner
 * message>"); a message longer than 2047 bytes ends with " [... N more bytes cut]", it
 * is never cut silently. "" if this thread has had no failure. The pointer is owned by
 * cgrt, valid until this thread's next cgrt call. Thread-safe (per-thread storage);
 * may be called during capture. */
const char *cgrt_last_error(void);

typedef enum cgrt_log_level {
  CGRT_LOG_ERROR = 0,
  CGRT_LOG_WARN = 1,
  CGRT_LOG_INFO = 2,
  CGRT_LOG_DEBUG = 3
} cgrt_log_level;

/* The host's log sink. `message` is valid only for the duration of the call. */
typedef void (*cgrt_log_fn)(void *user, cgrt_log_level level, const char *message);

/* Sets the process-wide log callback and the most verbose level it receives. NULL
 * restores the default (silent). The callback may be invoked from any thread that
 * calls into cgrt, including during capture; it must not call back into cgrt.
 * Thread-safe. */
void cgrt_set_log_callback(cgrt_log_fn fn, void *user, cgrt_log_level max_level);

#ifdef __cplusplus
}
#endif
#endif
