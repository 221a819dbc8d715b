/* cgrt: events — mark a point in a stream, wait for it, time the work between two.
 *
 * A cgrt_event is a CUDA event (timing enabled) on the runtime's context, made through
 * cgrt's driver table: the same host code times work on a GPU and on the CPU emulation
 * (where work runs when it is enqueued and an event records the host's monotonic clock).
 * Hosts that do not link the CUDA runtime (a Python engine over ctypes) time their steps
 * with it. */
#ifndef CGRT_EVENT_H
#define CGRT_EVENT_H

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_status.h"
#include "cgrt/cgrt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_event cgrt_event;

/* Creates an event with timing enabled (cuEventCreate with CU_EVENT_DEFAULT). On
 * success *out owns the event; release it with cgrt_event_destroy. An event still alive
 * when its runtime is destroyed is destroyed with it (a warning is logged; its handle is
 * then no longer live). On failure *out is NULL and nothing leaks.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (rt not live); CGRT_ERROR_INVALID_ARGUMENT
 * (out NULL); CGRT_ERROR_OUT_OF_MEMORY; CGRT_ERROR_DRIVER. Thread-safe. May be called
 * during capture (it enqueues nothing). */
cgrt_status cgrt_event_create(cgrt_runtime *rt, cgrt_event **out);

/* Destroys an event. NULL, an event already destroyed (directly or with its runtime) and
 * a pointer that was never an event are no-ops (nothing is read). Work recorded on it
 * that has not completed is unaffected. Not thread-safe with other calls on the same
 * event. */
void cgrt_event_destroy(cgrt_event *e);

/* Records the event on `stream` (NULL: the legacy default stream) after the work
 * enqueued there so far (cuEventRecord). Capture-safe: on a stream that is capturing it
 * records no timestamp but marks the capture point, which a cuStreamWaitEvent on another
 * stream uses to fork or join that stream into the capture (as the driver does); such an
 * event can then be neither waited for nor timed until it is recorded again outside
 * capture (cgrt remembers whether the last record was a capture point, from the
 * stream's capture status, and refuses those calls with CGRT_ERROR_CAPTURING before the
 * driver sees them). Recording again moves the event to the new point.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (e not live); CGRT_ERROR_DRIVER (e.g.
 * a stream of another context). Thread-safe. */
cgrt_status cgrt_event_record(cgrt_event *e, CUstream stream);

/* Waits until the work before the event's last record has completed (cuEventSynchronize;
 * returns at once for an event never recorded).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_CAPTURING (the event was
 * last recorded inside a capture, or the calling thread captures a graph of a cgrt graph
 * set, e.g. from an enqueue callback under capture: nothing is waited for);
 * CGRT_ERROR_DRIVER (includes an earlier asynchronous failure of that work).
 * Thread-safe. Must not be called while the calling thread captures a stream. */
cgrt_status cgrt_event_synchronize(cgrt_event *e);

/* *done = 1 when the work before the event's last record has completed (or it was never
 * recorded), 0 while it is still pending (cuEventQuery; does not wait). *done is left
 * unchanged on failure.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (done
 * NULL); CGRT_ERROR_CAPTURING (as cgrt_event_synchronize); CGRT_ERROR_DRIVER.
 * Thread-safe. Must not be called while the calling thread captures a stream: the
 * driver counts a query as an unsafe call and invalidates that capture (during a capture
 * by a cgrt graph set cgrt refuses it first, and the capture goes on). */
cgrt_status cgrt_event_query(cgrt_event *e, int *done);

/* Milliseconds between the records of `start` and `end` (cuEventElapsedTime, with the
 * driver's resolution), after waiting for `end` to complete (so never "not ready").
 * Both events must belong to the same runtime and have been recorded outside capture.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (either event not live);
 * CGRT_ERROR_INVALID_ARGUMENT (ms NULL, events of two runtimes, an event never recorded);
 * CGRT_ERROR_CAPTURING (an event last recorded inside a capture, or the calling thread
 * captures, as cgrt_event_synchronize); CGRT_ERROR_DRIVER.
 * Thread-safe. Must not be called while the calling thread captures a stream. */
cgrt_status cgrt_event_elapsed_ms(const cgrt_event *start, const cgrt_event *end, float *ms);

#ifdef __cplusplus
}
#endif
#endif
