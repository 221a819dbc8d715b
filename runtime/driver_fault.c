/* Fault-injection wrapper around a driver table: counts calls, fails a chosen one.
 * Generated from the same X-macro list as the table (runtime/driver.h). */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "cgrt/cgrt_fault.h"
#include "runtime/driver.h"
#include "runtime/error.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* One wrapper table per wrapped base (the emulation, the real driver, a test's fake
 * library), each filled once and never changed: runtimes over different bases may be
 * created, used and destroyed concurrently. Slot k's wrappers reach its base through
 * g_base[k], written once (under g_mu, release) before the table is handed out. */
#define FAULT_SLOTS 4
static const cgrt__driver *g_base[FAULT_SLOTS];
static cgrt__driver g_table[FAULT_SLOTS];

static char g_symbol[64];
static int g_has_symbol;
static unsigned long g_fail_at;
static int g_result; /* the plan's result, 0 when unset */
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
  g_result = plan ? plan->result : 0;
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

/* The check shared by the driver's and NCCL's wrappers (runtime/driver.h). Error
 * name/string look-ups are never counted or failed: they report failures. */
int cgrt__fault_check(const char *symbol, int *result) {
  if (strcmp(symbol, "cuGetErrorName") == 0 || strcmp(symbol, "cuGetErrorString") == 0) return 0;
  int fail = 0;
  pthread_mutex_lock(&g_mu);
  if (!g_has_symbol || strcmp(g_symbol, symbol) == 0) {
    g_calls++;
    g_last_symbol = symbol;
    if (g_fail_at != 0 && (g_calls == g_fail_at || (g_sticky && g_calls > g_fail_at))) {
      g_injected++;
      fail = 1;
      *result = g_result;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return fail;
}

/* Returns the CUresult to inject, or CUDA_SUCCESS to pass the call through. */
static CUresult fault_check(const char *symbol) {
  int r = 0;
  if (!cgrt__fault_check(symbol, &r)) return CUDA_SUCCESS;
  return r ? (CUresult)r : CUDA_ERROR_UNKNOWN;
}

/* The wrappers of slot k: fault<k>_<symbol>. `name` is stringified where the list names
 * the entry: one macro level further, sym is expanded (cuda.h maps some names to _v2). */
#define CGRT__FAULT_WRAP(k, sym, name, params, args)                                \
  static CUresult CUDAAPI fault##k##_##sym params {                                 \
    CUresult r_ = fault_check(name);                                                \
    if (r_ != CUDA_SUCCESS) return r_;                                              \
    const cgrt__driver *b_ = __atomic_load_n(&g_base[k], __ATOMIC_ACQUIRE);         \
    if (b_->sym == NULL) return CUDA_ERROR_NOT_SUPPORTED;                           \
    return b_->sym args;                                                            \
  }
#define CGRT__FAULT_WRAP0(sym, ver, req, params, args) CGRT__FAULT_WRAP(0, sym, #sym, params, args)
#define CGRT__FAULT_WRAP1(sym, ver, req, params, args) CGRT__FAULT_WRAP(1, sym, #sym, params, args)
#define CGRT__FAULT_WRAP2(sym, ver, req, params, args) CGRT__FAULT_WRAP(2, sym, #sym, params, args)
#define CGRT__FAULT_WRAP3(sym, ver, req, params, args) CGRT__FAULT_WRAP(3, sym, #sym, params, args)
CGRT_DRIVER_API(CGRT__FAULT_WRAP0)
CGRT_DRIVER_API(CGRT__FAULT_WRAP1)
CGRT_DRIVER_API(CGRT__FAULT_WRAP2)
CGRT_DRIVER_API(CGRT__FAULT_WRAP3)

/* Points table t at the wrappers of slot k. */
static void fill(cgrt__driver *t, int k) {
  switch (k) {
#define CGRT__FAULT_FIELD(k, sym) t->sym = fault##k##_##sym;
#define CGRT__FAULT_FIELD0(sym, ver, req, params, args) CGRT__FAULT_FIELD(0, sym)
#define CGRT__FAULT_FIELD1(sym, ver, req, params, args) CGRT__FAULT_FIELD(1, sym)
#define CGRT__FAULT_FIELD2(sym, ver, req, params, args) CGRT__FAULT_FIELD(2, sym)
#define CGRT__FAULT_FIELD3(sym, ver, req, params, args) CGRT__FAULT_FIELD(3, sym)
    case 0: CGRT_DRIVER_API(CGRT__FAULT_FIELD0) break;
    case 1: CGRT_DRIVER_API(CGRT__FAULT_FIELD1) break;
    case 2: CGRT_DRIVER_API(CGRT__FAULT_FIELD2) break;
    default: CGRT_DRIVER_API(CGRT__FAULT_FIELD3) break;
  }
}
_Static_assert(FAULT_SLOTS == 4, "one CGRT__FAULT_WRAP<k> and CGRT__FAULT_FIELD<k> per slot");

const cgrt__driver *cgrt__driver_fault(const cgrt__driver *base) {
  const cgrt__driver *out = NULL;
  pthread_mutex_lock(&g_mu);
  for (int k = 0; k < FAULT_SLOTS && out == NULL; k++) {
    if (g_base[k] == base) {
      out = &g_table[k];
    } else if (g_base[k] == NULL) {
      fill(&g_table[k], k);
      g_table[k].name = base->is_emulated ? "fault(emulated)" : "fault(cuda)";
      g_table[k].is_emulated = base->is_emulated;
      __atomic_store_n(&g_base[k], base, __ATOMIC_RELEASE);
      out = &g_table[k];
    }
  }
  pthread_mutex_unlock(&g_mu);
  return out;
}
