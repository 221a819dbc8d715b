/* Fault-injection wrapper around a driver table: counts calls, fails a chosen one.
 * Generated from the same X-macro list as the table (runtime/driver.h). */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "cgrt/cgrt_fault.h"
#include "runtime/driver.h"
#include "runtime/error.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const cgrt__driver *g_base;
static cgrt__driver g_table;
static int g_table_ready;

static char g_symbol[64];
static int g_has_symbol;
static unsigned long g_fail_at;
static CUresult g_result = CUDA_ERROR_UNKNOWN;
static int g_sticky;
static unsigned long g_calls;
static unsigned long g_injected;
static const char *g_last_symbol = "";

cgrt_status cgrt_fault_set(const cgrt_fault_plan *plan) {
  if (plan && plan->size < offsetof(cgrt_fault_plan, sticky) + sizeof(int))
    return cgrt__fail(CGRT_ERROR_INVALID_ARGUMENT, "cgrt_fault_set: plan->size %zu is below %zu (sizeof(cgrt_fault_plan))",
                      plan->size, offsetof(cgrt_fault_plan, sticky) + sizeof(int));
  pthread_mutex_lock(&g_mu);
  g_calls = 0;
  g_injected = 0;
  g_fail_at = plan ? plan->fail_at : 0;
  g_sticky = plan ? plan->sticky : 0;
  g_result = (plan && plan->result) ? (CUresult)plan->result : CUDA_ERROR_UNKNOWN;
  g_has_symbol = plan && plan->symbol;
  if (g_has_symbol) {
    strncpy(g_symbol, plan->symbol, sizeof g_symbol - 1);
    g_symbol[sizeof g_symbol - 1] = 0;
  }
  g_last_symbol = "";
  pthread_mutex_unlock(&g_mu);
  return CGRT_SUCCESS;
}

unsigned long cgrt_fault_calls(void) {
  pthread_mutex_lock(&g_mu);
  unsigned long n = g_calls;
  pthread_mutex_unlock(&g_mu);
  return n;
}

unsigned long cgrt_fault_injected(void) {
  pthread_mutex_lock(&g_mu);
  unsigned long n = g_injected;
  pthread_mutex_unlock(&g_mu);
  return n;
}

const char *cgrt_fault_last_symbol(void) {
  pthread_mutex_lock(&g_mu);
  const char *s = g_last_symbol;
  pthread_mutex_unlock(&g_mu);
  return s;
}

/* Returns the CUresult to inject, or CUDA_SUCCESS to pass the call through. Error
 * name/string look-ups are never counted or failed: they report failures. */
static CUresult fault_check(const char *symbol) {
  if (strcmp(symbol, "cuGetErrorName") == 0 || strcmp(symbol, "cuGetErrorString") == 0)
    return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  if (!g_has_symbol || strcmp(g_symbol, symbol) == 0) {
    g_calls++;
    g_last_symbol = symbol;
    if (g_fail_at != 0 && (g_calls == g_fail_at || (g_sticky && g_calls > g_fail_at))) {
      g_injected++;
      r = g_result;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

#define CGRT__FAULT_WRAPPER(sym, ver, req, params, args)     \
  static CUresult CUDAAPI fault_##sym params {               \
    CUresult r_ = fault_check(#sym);                         \
    if (r_ != CUDA_SUCCESS) return r_;                       \
    if (g_base->sym == NULL) return CUDA_ERROR_NOT_SUPPORTED; \
    return g_base->sym args;                                 \
  }
CGRT_DRIVER_API(CGRT__FAULT_WRAPPER)
#undef CGRT__FAULT_WRAPPER

const cgrt__driver *cgrt__driver_fault(const cgrt__driver *base) {
  pthread_mutex_lock(&g_mu);
  /* One wrapper table per process; it follows the most recently wrapped base. Tests
   * that mix real and emulated runtimes with fault injection at once are unsupported. */
  g_base = base;
  if (!g_table_ready) {
#define CGRT__FAULT_FIELD(sym, ver, req, params, args) g_table.sym = fault_##sym;
    CGRT_DRIVER_API(CGRT__FAULT_FIELD)
#undef CGRT__FAULT_FIELD
    g_table_ready = 1;
  }
  g_table.name = base->is_emulated ? "fault(emulated)" : "fault(cuda)";
  g_table.is_emulated = base->is_emulated;
  pthread_mutex_unlock(&g_mu);
  return &g_table;
}
