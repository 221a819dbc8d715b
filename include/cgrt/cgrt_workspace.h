/* cgrt: locked workspaces and the counter buffer of multi-CTA kernels.
 *
 * "Size once, lock." During warm-up every scratch buffer is requested at its worst
 * case; cgrt_workspace_lock then freezes every reservation and the counter buffer.
 * After the lock, requests that fit return the very same device addresses, and any
 * request that would grow a reservation fails with CGRT_ERROR_WORKSPACE_LOCKED: nothing
 * is freed, moved or reallocated, so pointers captured into CUDA graphs stay valid.
 *
 * A reservation is named and belongs to a lane (e.g. CGRT_LANE_TARGET and
 * CGRT_LANE_DRAFT): the same name in two lanes is two separate storages, usable at the
 * same time. It holds several buffers used together, carved from one allocation, each
 * starting on a 256-byte boundary and followed by guard words that
 * cgrt_workspace_verify checks. */
#ifndef CGRT_WORKSPACE_H
#define CGRT_WORKSPACE_H

#include "cgrt/cgrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CGRT_WORKSPACE_ALIGNMENT 256
#define CGRT_MAX_LANES 8
#define CGRT_MAX_TENSOR_DIMS 6

enum { CGRT_LANE_TARGET = 0, CGRT_LANE_DRAFT = 1 };

typedef enum cgrt_dtype {
  CGRT_DTYPE_U8 = 0,
  CGRT_DTYPE_I32 = 1,
  CGRT_DTYPE_I64 = 2,
  CGRT_DTYPE_F16 = 3,
  CGRT_DTYPE_BF16 = 4,
  CGRT_DTYPE_F32 = 5
} cgrt_dtype;

/* Bytes per element of a dtype; 0 for an unknown value. */
size_t cgrt_dtype_size(cgrt_dtype dtype);

/* One buffer of a reservation: a dense tensor of `ndim` dimensions. */
typedef struct cgrt_tensor_desc {
  int ndim;
  int64_t shape[CGRT_MAX_TENSOR_DIMS];
  cgrt_dtype dtype;
} cgrt_tensor_desc;

/* Requests the `count` buffers of reservation (lane, name) and returns their device
 * addresses in ptrs[0..count).
 *
 * Before the lock: the first request reserves; a later request that fits every buffer
 * returns the same addresses; a larger one grows the reservation (new addresses; the
 * old storage is freed, so do this only during warm-up).
 * After the lock: a request that fits returns the same addresses; one that needs more
 * bytes for any buffer, or more buffers, fails with CGRT_ERROR_WORKSPACE_LOCKED and a
 * message naming the reservation, the buffer, the requested and the reserved bytes.
 *
 * Ownership: the storage belongs to the runtime and lives until it is destroyed.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (NULL
 * name/descs/ptrs, count 0, lane out of range, bad shape or dtype, size overflow);
 * CGRT_ERROR_WORKSPACE_LOCKED; CGRT_ERROR_CAPTURING (a reservation or growth while the
 * runtime captures a graph); CGRT_ERROR_OUT_OF_MEMORY; CGRT_ERROR_DRIVER.
 * Thread-safe (serialized per runtime). During capture: only requests that fit. */
cgrt_status cgrt_workspace_request(cgrt_runtime *rt, int lane, const char *name,
                                   const cgrt_tensor_desc *descs, size_t count,
                                   CUdeviceptr *ptrs);

/* Locks every reservation and the counter buffer (allocating the counters at their
 * final size if they were not yet). Idempotent.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_OUT_OF_MEMORY,
 * CGRT_ERROR_DRIVER. Thread-safe. Must not be called during capture. */
cgrt_status cgrt_workspace_lock(cgrt_runtime *rt);

/* 1 if the runtime's workspaces are locked, 0 if not or rt is not live. */
int cgrt_workspace_is_locked(cgrt_runtime *rt);

/* Totals of what is reserved. */
typedef struct cgrt_workspace_stats {
  size_t size;              /* set by the caller to sizeof(cgrt_workspace_stats) */
  size_t reservations;      /* number of (lane, name) reservations */
  size_t buffers;           /* buffers across all reservations */
  size_t bytes_requested;   /* sum of reserved buffer sizes */
  size_t bytes_allocated;   /* device bytes held, alignment and guards included */
  size_t counter_bytes;     /* size of the counter buffer */
  int locked;
} cgrt_workspace_stats;

/* Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_INVALID_ARGUMENT.
 * Thread-safe. May be called during capture. */
cgrt_status cgrt_workspace_get_stats(cgrt_runtime *rt, cgrt_workspace_stats *stats);

/* Calls fn once per reservation (in creation order) with its lane, name, number of
 * buffers and reserved bytes, for reports such as the demo's. The reservations are
 * copied when the visit starts and fn runs without any cgrt lock held: fn may call cgrt,
 * on this runtime too (a reservation it makes is not visited; `name` is valid during the
 * call only). Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE,
 * CGRT_ERROR_INVALID_ARGUMENT (fn NULL), CGRT_ERROR_OUT_OF_MEMORY (the copy; fn is not
 * called). Thread-safe. */
typedef void (*cgrt_workspace_visit_fn)(void *user, int lane, const char *name,
                                        size_t buffers, size_t bytes);
cgrt_status cgrt_workspace_visit(cgrt_runtime *rt, cgrt_workspace_visit_fn fn, void *user);

/* Checks the guard words after every buffer of every reservation (device-to-host
 * copies; synchronizes with the context first, as cgrt_runtime_synchronize does).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_GUARD_CORRUPTED (message names the reservation,
 * the buffer and the first bad offset); CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_CAPTURING
 * (the calling thread captures a graph); CGRT_ERROR_DRIVER.
 * Thread-safe. Must not be called during capture. */
cgrt_status cgrt_workspace_verify(cgrt_runtime *rt);

/* ---- counter buffer of multi-CTA kernels --------------------------------------
 * One buffer of 32-bit counters shared by every multi-CTA kernel of the runtime.
 * Kernels increment a counter per (row, head group) and the last CTA resets it to 0,
 * so the buffer is zeroed once, when it is allocated, and never per step. */

/* Bytes the decode kernels need for max_rows rows of `heads` heads:
 * round_up(max(max_rows * heads, sm_count), 8) * 4. Never wraps: when that size does not
 * fit in a size_t it returns SIZE_MAX, which cgrt_counters_reserve refuses with
 * CGRT_ERROR_INVALID_ARGUMENT (as every size above 2^40 bytes). Thread-safe; may be
 * called during capture. */
size_t cgrt_counters_decode_bytes(size_t max_rows, size_t heads, int sm_count);

/* Raises the counter buffer's size to at least `bytes` (rounded up to 32 bytes; 1 to
 * 2^40 bytes, else CGRT_ERROR_INVALID_ARGUMENT).
 * Before the lock a larger request reallocates (zeroed; the old address is gone).
 * After the lock a larger request fails with CGRT_ERROR_WORKSPACE_LOCKED.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_INVALID_ARGUMENT,
 * CGRT_ERROR_WORKSPACE_LOCKED, CGRT_ERROR_CAPTURING, CGRT_ERROR_OUT_OF_MEMORY,
 * CGRT_ERROR_DRIVER. Thread-safe. During capture: only requests that fit. */
cgrt_status cgrt_counters_reserve(cgrt_runtime *rt, size_t bytes);

/* The counter buffer's address and size (allocating it, zeroed, if reserved but not
 * yet allocated). *ptr is 0 when nothing was reserved.
 * Statuses: as cgrt_counters_reserve. Thread-safe. */
cgrt_status cgrt_counters_get(cgrt_runtime *rt, CUdeviceptr *ptr, size_t *bytes);

/* Checks that every counter is zero (synchronizes first, as cgrt_runtime_synchronize
 * does; nothing to check and CGRT_SUCCESS while no counter buffer is allocated).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_COUNTERS_DIRTY (message gives how many counters
 * are non-zero, the first index and its value); CGRT_ERROR_INVALID_HANDLE;
 * CGRT_ERROR_CAPTURING (the calling thread captures a graph); CGRT_ERROR_DRIVER.
 * Thread-safe. Must not be called during capture. */
cgrt_status cgrt_counters_verify(cgrt_runtime *rt);

#ifdef __cplusplus
}
#endif
#endif
