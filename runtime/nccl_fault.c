/* Fault-injection wrapper around an NCCL table: the plan of cgrt_fault_set (shared with
 * the driver's wrapper) counts the calls and fails a chosen one. The wrappers and their
 * slots are generated from the table's X-macro list (runtime/nccl.h) by
 * runtime/fault_slots.h. */
#include <string.h>

#include "runtime/fault_slots.h"
#include "runtime/nccl.h"

/* Slot k's wrappers reach their base through g_base[k] (see runtime/fault_slots.h). */
static const void *g_base[CGRT__FAULT_SLOTS];

/* ncclResult_t to inject for a counted call, or ncclSuccess. */
static ncclResult_t check(const char *symbol) {
  int r = 0;
  if (!cgrt__fault_check(symbol, &r)) return ncclSuccess;
  return r ? (ncclResult_t)r : ncclInternalError;
}

/* The wrappers of slot k: nf<k>_<symbol>. counted 1: the plan is consulted first;
 * 2: the call runs, then the plan may replace its result (see runtime/nccl.h); 0: never
 * counted. */
#define BASE(k) ((const cgrt__nccl *)CGRT__FAULT_BASE(g_base, k))
#define CGRT__NF_BODY_0(k, name, sym, args) return BASE(k)->sym args;
#define CGRT__NF_BODY_1(k, name, sym, args) \
  ncclResult_t r_ = check(name);            \
  if (r_ != ncclSuccess) return r_;         \
  return BASE(k)->sym args;
#define CGRT__NF_BODY_2(k, name, sym, args) \
  ncclResult_t r_ = BASE(k)->sym args;      \
  ncclResult_t f_ = check(name);            \
  return f_ != ncclSuccess ? f_ : r_;
#define CGRT__FAULT_ENTRY(k, name, sym, req, counted, ret, params, args) \
  static ret nf##k##_##sym params { CGRT__NF_BODY_##counted(k, name, sym, args) }
CGRT__FAULT_EACH_SLOT(CGRT_NCCL_API)
#undef CGRT__FAULT_ENTRY

/* Table k: the wrappers of slot k (name, version, path: the base's, set on claim). */
#define CGRT__FAULT_ENTRY(k, name, sym, req, counted, ret, params, args) .sym = nf##k##_##sym,
static cgrt__nccl g_table[CGRT__FAULT_SLOTS] = {CGRT__FAULT_SLOT_TABLES(CGRT_NCCL_API)};
#undef CGRT__FAULT_ENTRY

static void claim(int k, const void *b) {
  const cgrt__nccl *base = (const cgrt__nccl *)b;
  g_table[k].name = base->is_emulated ? "fault(emulated)" : "fault(nccl)";
  g_table[k].is_emulated = base->is_emulated;
  g_table[k].version = base->version;
  memcpy(g_table[k].path, base->path, sizeof g_table[k].path);
}

const cgrt__nccl *cgrt__nccl_fault(const cgrt__nccl *base) {
  int k = cgrt__fault_slot(g_base, base, claim);
  return k < 0 ? NULL : &g_table[k];
}
