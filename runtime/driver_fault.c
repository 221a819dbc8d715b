/* Fault-injection wrapper around a driver table: every call is checked against the plan
 * of cgrt_fault_set, which counts it and may fail it. The wrappers and their slots are
 * generated from the table's X-macro list (runtime/driver.h) by runtime/fault_slots.h. */
#include <string.h>

#include "runtime/driver.h"
#include "runtime/fault_slots.h"

/* Slot k's wrappers reach their base through g_base[k] (see runtime/fault_slots.h). */
static const void *g_base[CGRT__FAULT_SLOTS];

/* Returns the CUresult to inject, or CUDA_SUCCESS to pass the call through. Error
 * name/string look-ups are never counted or failed: they report failures. */
static CUresult fault_check(const char *symbol) {
  if (strcmp(symbol, "cuGetErrorName") == 0 || strcmp(symbol, "cuGetErrorString") == 0) return CUDA_SUCCESS;
  int r = 0;
  if (!cgrt__fault_check(symbol, &r)) return CUDA_SUCCESS;
  return r ? (CUresult)r : CUDA_ERROR_UNKNOWN;
}

/* The wrappers of slot k: fault<k>_<symbol>. */
#define CGRT__FAULT_ENTRY(k, name, sym, ver, req, params, args)                         \
  static CUresult CUDAAPI fault##k##_##sym params {                                     \
    CUresult r_ = fault_check(name);                                                    \
    if (r_ != CUDA_SUCCESS) return r_;                                                  \
    const cgrt__driver *b_ = (const cgrt__driver *)CGRT__FAULT_BASE(g_base, k);         \
    if (b_->sym == NULL) return CUDA_ERROR_NOT_SUPPORTED;                               \
    return b_->sym args;                                                                \
  }
CGRT__FAULT_EACH_SLOT(CGRT_DRIVER_API)
#undef CGRT__FAULT_ENTRY

/* Table k: the wrappers of slot k (name and is_emulated are the base's, set on claim). */
#define CGRT__FAULT_ENTRY(k, name, sym, ver, req, params, args) .sym = fault##k##_##sym,
static cgrt__driver g_table[CGRT__FAULT_SLOTS] = {CGRT__FAULT_SLOT_TABLES(CGRT_DRIVER_API)};
#undef CGRT__FAULT_ENTRY

static void claim(int k, const void *b) {
  const cgrt__driver *base = (const cgrt__driver *)b;
  g_table[k].name = base->is_emulated ? "fault(emulated)" : "fault(cuda)";
  g_table[k].is_emulated = base->is_emulated;
}

const cgrt__driver *cgrt__driver_fault(const cgrt__driver *base) {
  int k = cgrt__fault_slot(g_base, base, claim);
  return k < 0 ? NULL : &g_table[k];
}
