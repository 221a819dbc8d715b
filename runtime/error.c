/* Status names, per-thread failure messages, the host's log callback. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

static _Thread_local char t_last_error[CGRT__MSG_CAP];
static _Thread_local unsigned long t_failures; /* failures recorded on this thread */

const char *cgrt_status_name(cgrt_status status) {
  switch (status) {
#define CGRT__STATUS_NAME(name, value, msg) \
  case CGRT_##name:                         \
    return "CGRT_" #name;
    CGRT_STATUS_MAP(CGRT__STATUS_NAME)
#undef CGRT__STATUS_NAME
  }
  return "CGRT_STATUS_UNKNOWN";
}

const char *cgrt_status_string(cgrt_status status) {
  switch (status) {
#define CGRT__STATUS_STRING(name, value, msg) \
  case CGRT_##name:                           \
    return msg;
    CGRT_STATUS_MAP(CGRT__STATUS_STRING)
#undef CGRT__STATUS_STRING
  }
  return "unknown status";
}

const char *cgrt_last_error(void) { return t_last_error; }

unsigned long cgrt__error_count(void) { return t_failures; }

/* A message under construction, in its own storage: the arguments may point into the
 * thread's current message (a prefix over it, a callback's failure quoted by cgrt), so
 * nothing is written to t_last_error before the whole new message is composed. */
typedef struct msg_buf {
  char text[CGRT__MSG_CAP];
  size_t len;
  size_t lost; /* bytes that did not fit */
} msg_buf;

static void msg_vappend(msg_buf *m, const char *fmt, va_list ap) {
  size_t room = sizeof m->text - m->len;
  int n = vsnprintf(m->text + m->len, room, fmt, ap);
  if (n < 0) return;
  if ((size_t)n < room) {
    m->len += (size_t)n;
  } else {
    m->lost += (size_t)n - (room - 1);
    m->len = sizeof m->text - 1;
  }
}

static void msg_append(msg_buf *m, const char *fmt, ...) CGRT__PRINTF(2, 3);
static void msg_append(msg_buf *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  msg_vappend(m, fmt, ap);
  va_end(ap);
}

/* Publishes m as the thread's message. A message that did not fit ends with a marker
 * saying how many bytes were cut: never a silent truncation. */
static void msg_publish(msg_buf *m) {
  if (m->lost > 0) {
    char mark[48];
    int n = snprintf(mark, sizeof mark, " [... %zu more bytes cut]", m->lost);
    size_t keep = sizeof m->text - 1 - (size_t)n;
    if (m->len > keep) m->len = keep;
    memcpy(m->text + m->len, mark, (size_t)n + 1);
    m->len += (size_t)n;
  }
  memcpy(t_last_error, m->text, m->len + 1);
  t_failures++;
}

cgrt_status cgrt__fail(cgrt_status status, const char *fmt, ...) {
  msg_buf m = {.len = 0, .lost = 0};
  m.text[0] = 0;
  va_list ap;
  va_start(ap, fmt);
  msg_vappend(&m, fmt, ap);
  va_end(ap);
  msg_publish(&m);
  cgrt__log(CGRT_LOG_DEBUG, "%s: %s", cgrt_status_name(status), t_last_error);
  return status;
}

cgrt_status cgrt__fail_cu(cgrt_status status, CUresult r, const char *symbol, const char *what) {
  if (r == CUDA_ERROR_OUT_OF_MEMORY) status = CGRT_ERROR_OUT_OF_MEMORY;
  return cgrt__fail(status, "%s: %s failed with %s (%d)", what, symbol, cgrt__curesult_name(r),
                    (int)r);
}

void cgrt__error_prefix(const char *fmt, ...) {
  msg_buf m = {.len = 0, .lost = 0};
  m.text[0] = 0;
  va_list ap;
  va_start(ap, fmt);
  msg_vappend(&m, fmt, ap);
  va_end(ap);
  msg_append(&m, ": %s", t_last_error);
  msg_publish(&m);
}

void cgrt__warn_cu(CUresult r, const char *symbol, const char *what) {
  if (r != CUDA_SUCCESS)
    cgrt__log(CGRT_LOG_WARN, "%s: %s failed with %s (%d)", what, symbol, cgrt__curesult_name(r), (int)r);
}

/* ---- log callback ---- */
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static cgrt_log_fn g_log_fn;
static void *g_log_user;
static int g_log_level = -1; /* -1: silent */

void cgrt_set_log_callback(cgrt_log_fn fn, void *user, cgrt_log_level max_level) {
  pthread_mutex_lock(&g_log_mu);
  g_log_fn = fn;
  g_log_user = user;
  __atomic_store_n(&g_log_level, fn ? (int)max_level : -1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_log_mu);
}

int cgrt__log_enabled(cgrt_log_level level) {
  return (int)level <= __atomic_load_n(&g_log_level, __ATOMIC_ACQUIRE);
}

void cgrt__log(cgrt_log_level level, const char *fmt, ...) {
  if (!cgrt__log_enabled(level)) return;
  char buf[CGRT__MSG_CAP + 64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_log_mu);
  cgrt_log_fn fn = g_log_fn;
  void *user = g_log_user;
  pthread_mutex_unlock(&g_log_mu);
  if (fn) fn(user, level, buf);
}

/* ---- CUresult names that work without a driver ---- */
const char *cgrt__curesult_name(CUresult r) {
  switch (r) {
#define N(x) \
  case x:    \
    return #x;
    N(CUDA_SUCCESS) N(CUDA_ERROR_INVALID_VALUE) N(CUDA_ERROR_OUT_OF_MEMORY)
    N(CUDA_ERROR_NOT_INITIALIZED) N(CUDA_ERROR_DEINITIALIZED) N(CUDA_ERROR_NO_DEVICE)
    N(CUDA_ERROR_INVALID_DEVICE) N(CUDA_ERROR_INVALID_IMAGE) N(CUDA_ERROR_INVALID_CONTEXT)
    N(CUDA_ERROR_NO_BINARY_FOR_GPU) N(CUDA_ERROR_INVALID_PTX) N(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    N(CUDA_ERROR_INVALID_HANDLE) N(CUDA_ERROR_NOT_FOUND) N(CUDA_ERROR_NOT_READY)
    N(CUDA_ERROR_ILLEGAL_ADDRESS) N(CUDA_ERROR_LAUNCH_FAILED) N(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    N(CUDA_ERROR_NOT_SUPPORTED) N(CUDA_ERROR_NOT_PERMITTED) N(CUDA_ERROR_ILLEGAL_STATE)
    N(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) N(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    N(CUDA_ERROR_STREAM_CAPTURE_MERGE) N(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED)
    N(CUDA_ERROR_STREAM_CAPTURE_UNJOINED) N(CUDA_ERROR_STREAM_CAPTURE_ISOLATION)
    N(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) N(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
    N(CUDA_ERROR_CAPTURED_EVENT) N(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)
    N(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH) N(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE) N(CUDA_ERROR_STUB_LIBRARY)
    N(CUDA_ERROR_UNKNOWN) N(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND)
    N(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED) N(CUDA_ERROR_OPERATING_SYSTEM)
    N(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) N(CUDA_ERROR_ASSERT) N(CUDA_ERROR_TOO_MANY_PEERS)
    N(CUDA_ERROR_MISALIGNED_ADDRESS) N(CUDA_ERROR_INVALID_SOURCE) N(CUDA_ERROR_FILE_NOT_FOUND)
    N(CUDA_ERROR_ALREADY_MAPPED) N(CUDA_ERROR_CONTEXT_ALREADY_IN_USE)
    N(CUDA_ERROR_INVALID_ADDRESS_SPACE) N(CUDA_ERROR_INVALID_PC) N(CUDA_ERROR_TIMEOUT)
    N(CUDA_ERROR_FUNCTION_NOT_LOADED) N(CUDA_ERROR_INVALID_RESOURCE_TYPE)
    N(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION)
#undef N
    default:
      return "CUDA_ERROR_(unknown code)";
  }
}
