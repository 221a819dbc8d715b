/* Fault-injection wrapper around an NCCL table: the plan of cgrt_fault_set (shared with
 * the driver's wrapper, runtime/driver_fault.c) counts the calls and fails a chosen one.
 * Generated from the same X-macro list as the table (runtime/nccl.h). */
#include <pthread.h>
#include <string.h>

#include "runtime/nccl.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

#define FAULT_SLOTS 4
static const cgrt__nccl *g_base[FAULT_SLOTS];
static cgrt__nccl g_table[FAULT_SLOTS];

/* ncclResult_t to inject for a counted call, or ncclSuccess. */
static ncclResult_t check(const char *symbol) {
  int r = 0;
  if (!cgrt__fault_check(symbol, &r)) return ncclSuccess;
  return r ? (ncclResult_t)r : ncclInternalError;
}

/* The wrappers of slot k: nf<k>_<symbol>. counted 1: the plan is consulted first;
 * 2: the call runs, then the plan may replace its result (see runtime/nccl.h). */
#define CGRT__NF_BODY_0(k, sym, args) return __atomic_load_n(&g_base[k], __ATOMIC_ACQUIRE)->sym args;
#define CGRT__NF_BODY_1(k, sym, args)                                   \
  ncclResult_t r_ = check(#sym);                                        \
  if (r_ != ncclSuccess) return r_;                                     \
  return __atomic_load_n(&g_base[k], __ATOMIC_ACQUIRE)->sym args;
#define CGRT__NF_BODY_2(k, sym, args)                                   \
  ncclResult_t r_ = __atomic_load_n(&g_base[k], __ATOMIC_ACQUIRE)->sym args; \
  ncclResult_t f_ = check(#sym);                                        \
  return f_ != ncclSuccess ? f_ : r_;
#define CGRT__NF_WRAP(k, sym, counted, ret, params, args) \
  static ret nf##k##_##sym params { CGRT__NF_BODY_##counted(k, sym, args) }
#define CGRT__NF0(sym, req, counted, ret, params, args) CGRT__NF_WRAP(0, sym, counted, ret, params, args)
#define CGRT__NF1(sym, req, counted, ret, params, args) CGRT__NF_WRAP(1, sym, counted, ret, params, args)
#define CGRT__NF2(sym, req, counted, ret, params, args) CGRT__NF_WRAP(2, sym, counted, ret, params, args)
#define CGRT__NF3(sym, req, counted, ret, params, args) CGRT__NF_WRAP(3, sym, counted, ret, params, args)
CGRT_NCCL_API(CGRT__NF0)
CGRT_NCCL_API(CGRT__NF1)
CGRT_NCCL_API(CGRT__NF2)
CGRT_NCCL_API(CGRT__NF3)

static void fill(cgrt__nccl *t, int k) {
  switch (k) {
#define CGRT__NF_FIELD(k, sym) t->sym = nf##k##_##sym;
#define CGRT__NF_FIELD0(sym, req, counted, ret, params, args) CGRT__NF_FIELD(0, sym)
#define CGRT__NF_FIELD1(sym, req, counted, ret, params, args) CGRT__NF_FIELD(1, sym)
#define CGRT__NF_FIELD2(sym, req, counted, ret, params, args) CGRT__NF_FIELD(2, sym)
#define CGRT__NF_FIELD3(sym, req, counted, ret, params, args) CGRT__NF_FIELD(3, sym)
    case 0: CGRT_NCCL_API(CGRT__NF_FIELD0) break;
    case 1: CGRT_NCCL_API(CGRT__NF_FIELD1) break;
    case 2: CGRT_NCCL_API(CGRT__NF_FIELD2) break;
    default: CGRT_NCCL_API(CGRT__NF_FIELD3) break;
  }
}
_Static_assert(FAULT_SLOTS == 4, "one CGRT__NF<k> and CGRT__NF_FIELD<k> per slot");

const cgrt__nccl *cgrt__nccl_fault(const cgrt__nccl *base) {
  const cgrt__nccl *out = NULL;
  pthread_mutex_lock(&g_mu);
  for (int k = 0; k < FAULT_SLOTS && out == NULL; k++) {
    if (g_base[k] == base) {
      out = &g_table[k];
    } else if (g_base[k] == NULL) {
      fill(&g_table[k], k);
      g_table[k].name = base->is_emulated ? "fault(emulated)" : "fault(nccl)";
      g_table[k].is_emulated = base->is_emulated;
      g_table[k].version = base->version;
      memcpy(g_table[k].path, base->path, sizeof g_table[k].path);
      __atomic_store_n(&g_base[k], base, __ATOMIC_RELEASE);
      out = &g_table[k];
    }
  }
  pthread_mutex_unlock(&g_mu);
  return out;
}
