/* The plan of cgrt_fault_set (include/cgrt/cgrt_fault.h) and the slots of the wrapped
 * tables (runtime/fault_slots.h). */
#include "runtime/fault_slots.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "cgrt/cgrt_fault.h"
#include "runtime/error.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the plan */
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

int cgrt__fault_check(const char *symbol, int *result) {
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

static pthread_mutex_t g_slots_mu = PTHREAD_MUTEX_INITIALIZER; /* the slots of every table */

int cgrt__fault_slot(const void **bases, const void *base, void (*init)(int k, const void *base)) {
  int out = -1;
  pthread_mutex_lock(&g_slots_mu);
  for (int k = 0; k < CGRT__FAULT_SLOTS && out < 0; k++) {
    if (bases[k] == base) {
      out = k;
    } else if (bases[k] == NULL) {
      init(k, base);
      __atomic_store_n(&bases[k], base, __ATOMIC_RELEASE);
      out = k;
    }
  }
  pthread_mutex_unlock(&g_slots_mu);
  return out;
}
