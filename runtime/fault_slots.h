/* Fault injection (include/cgrt/cgrt_fault.h) over cgrt's tables of entry points, written
 * once for the driver's (runtime/driver.h, wrapped by runtime/driver_fault.c) and NCCL's
 * (runtime/nccl.h, wrapped by runtime/nccl_fault.c). Internal.
 *
 * - The plan of cgrt_fault_set is process-wide: cgrt__fault_check counts a wrapped call
 *   and says whether the plan fails it.
 * - The slots. A wrapper has the signature of the entry point it replaces, so it cannot
 *   be handed the table it wraps (its base). A wrapped table therefore has
 *   CGRT__FAULT_SLOTS copies of its wrappers, one per slot, and copy k reaches its base
 *   through slot k; so up to CGRT__FAULT_SLOTS bases (the emulation, the real library, a
 *   test's fake library) are wrapped at once, each by a table that never changes once
 *   handed out. cgrt__fault_slot finds or claims a base's slot.
 * - The copies are generated from the table's X-macro list: CGRT__FAULT_EACH_SLOT(LIST)
 *   expands LIST once per slot k, and CGRT__FAULT_SLOT_TABLES(LIST) into the initializer
 *   {{slot 0}, {slot 1}, ...}; each entry X(sym, rest...) of the list becomes
 *   CGRT__FAULT_ENTRY(k, "sym", sym, rest...), a macro the wrapping file defines (the
 *   wrapper, then the table's field). The string is the symbol as the list names it
 *   (cuda.h maps some names to _v2 versions: `sym` itself may arrive expanded), which is
 *   the name a plan gives. */
#ifndef CGRT_RUNTIME_FAULT_SLOTS_H
#define CGRT_RUNTIME_FAULT_SLOTS_H

#ifdef __cplusplus
extern "C" {
#endif

#define CGRT__FAULT_SLOTS 4

#define CGRT__FAULT_AT0(sym, ...) CGRT__FAULT_ENTRY(0, #sym, sym, __VA_ARGS__)
#define CGRT__FAULT_AT1(sym, ...) CGRT__FAULT_ENTRY(1, #sym, sym, __VA_ARGS__)
#define CGRT__FAULT_AT2(sym, ...) CGRT__FAULT_ENTRY(2, #sym, sym, __VA_ARGS__)
#define CGRT__FAULT_AT3(sym, ...) CGRT__FAULT_ENTRY(3, #sym, sym, __VA_ARGS__)
#define CGRT__FAULT_EACH_SLOT(LIST) \
  LIST(CGRT__FAULT_AT0) LIST(CGRT__FAULT_AT1) LIST(CGRT__FAULT_AT2) LIST(CGRT__FAULT_AT3)
#define CGRT__FAULT_SLOT_TABLES(LIST) \
  {LIST(CGRT__FAULT_AT0)}, {LIST(CGRT__FAULT_AT1)}, {LIST(CGRT__FAULT_AT2)}, {LIST(CGRT__FAULT_AT3)}
_Static_assert(CGRT__FAULT_SLOTS == 4, "one CGRT__FAULT_AT<k> per slot, in both lists above");

/* The slot of wrapper copy k: the base it calls, read by the wrappers (acquire). */
#define CGRT__FAULT_BASE(bases, k) __atomic_load_n(&(bases)[k], __ATOMIC_ACQUIRE)

/* The slot of `base` among bases[0 .. CGRT__FAULT_SLOTS): the one that holds it, else the
 * first free one, claimed for it: init(k, base) completes slot k's table (its fields
 * other than the wrappers), then bases[k] = base (release), before the table is handed
 * out. -1 when every slot holds another base. Thread-safe (one lock for all tables). */
int cgrt__fault_slot(const void **bases, const void *base, void (*init)(int k, const void *base));

/* The plan of cgrt_fault_set, for the wrappers: counts a call to `symbol` (when the plan
 * names no symbol, or this one) and returns 1 when the plan fails it, with *result the
 * plan's result (0 when the plan gives none: each wrapper picks its default).
 * Thread-safe. */
int cgrt__fault_check(const char *symbol, int *result);

#ifdef __cplusplus
}
#endif
#endif
