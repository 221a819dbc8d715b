/* Internal: the registry of live handles (runtimes, graph sets, plans, modules, events)
 * and the storage they live in.
 *
 * Every public function that takes a handle asks the registry first, so a destroyed,
 * foreign or never-created pointer gets CGRT_ERROR_INVALID_HANDLE without cgrt ever
 * reading the memory it points to. One process-wide open-addressing table behind one
 * mutex: a lookup is a hash and a few compares (tens of nanoseconds).
 *
 * A handle is the address of its object, so a new object must never get the address of
 * a destroyed one: the old pointer, still held by a careless caller, would then name the
 * new object (get_info would answer, destroy would destroy it). Handle objects therefore
 * live in storage from cgrt__handle_alloc, which never hands out an address twice in a
 * process: it carves page-aligned blocks from reserved address space in increasing
 * order, and cgrt__handle_free returns a block's memory to the system but keeps its
 * addresses reserved (inaccessible) for the life of the process. Only such storage can be
 * registered. Costs: one or more pages of memory per live handle, and address space
 * (never memory) per handle ever created. */
#ifndef CGRT_RUNTIME_HANDLES_H
#define CGRT_RUNTIME_HANDLES_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cgrt__handle_kind {
  CGRT__HANDLE_RUNTIME = 1,
  CGRT__HANDLE_GRAPHS = 2,
  CGRT__HANDLE_MLA_PLAN = 3,
  CGRT__HANDLE_MODULE = 4,
  CGRT__HANDLE_EVENT = 5,
  CGRT__HANDLE_DCP_GROUP = 6,
  CGRT__HANDLE_SEGMENT = 7
} cgrt__handle_kind;

/* Zeroed storage of `bytes` for a handle object, at addresses no earlier call returned
 * in this process (page-aligned). NULL when bytes is 0 or out of memory. Not registered:
 * cgrt__handle_add makes it live. Thread-safe. */
void *cgrt__handle_alloc(size_t bytes);

/* Releases storage from cgrt__handle_alloc (NULL: no-op). The handle must no longer be
 * registered. Its addresses are never handed out again, and any access to them faults.
 * Thread-safe. */
void cgrt__handle_free(void *h);

/* Registers a live handle. Returns 0, or -1 when h is not storage from
 * cgrt__handle_alloc that is still allocated, is already registered, or the table is full
 * (then the object must not be handed out). Thread-safe. */
int cgrt__handle_add(const void *h, cgrt__handle_kind kind);

/* Removes a handle; returns 1 if it was live with that kind, 0 otherwise (so a second
 * destroy is detected). Thread-safe. */
int cgrt__handle_remove(const void *h, cgrt__handle_kind kind);

/* 1 if h is live with that kind. Thread-safe. */
int cgrt__handle_live(const void *h, cgrt__handle_kind kind);

#ifdef __cplusplus
}
#endif
#endif
