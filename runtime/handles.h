/* Internal: the registry of live handles (runtimes, graph sets, plans, modules, events).
 *
 * Every public function that takes a handle asks the registry first, so a destroyed,
 * foreign or never-created pointer gets CGRT_ERROR_INVALID_HANDLE without cgrt ever
 * reading the memory it points to. One process-wide open-addressing table behind one
 * mutex: a lookup is a hash and a few compares (tens of nanoseconds). */
#ifndef CGRT_RUNTIME_HANDLES_H
#define CGRT_RUNTIME_HANDLES_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cgrt__handle_kind {
  CGRT__HANDLE_RUNTIME = 1,
  CGRT__HANDLE_GRAPHS = 2,
  CGRT__HANDLE_MLA_PLAN = 3,
  CGRT__HANDLE_MODULE = 4,
  CGRT__HANDLE_EVENT = 5
} cgrt__handle_kind;

/* Registers a live handle. Returns 0, or -1 when the table is full (then the object
 * must not be handed out). Thread-safe. */
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
