/* The host's enqueue callback: the batch descriptor of a bucket and the call itself. */
#include <string.h>

#include "graphs/graphs_internal.h"

void gx_fill_desc(const cgrt_graphs *set, const gx_exec *e, const CUdeviceptr *addr,
                  cgrt_batch_desc *d) {
  memset(d, 0, sizeof(*d));
  d->mode = e->mode;
  d->block_len = gx_rows_per_req(set, e->mode);
  d->num_reqs = e->reqs;
  d->rows = e->rows;
  d->padded_reqs = e->reqs;
  d->padded_rows = e->rows;
  d->buffers = addr;
  d->num_buffers = set->nbuf;
}

cgrt_status gx_call_enqueue(cgrt_graphs *set, CUstream s, const cgrt_batch_desc *d) {
  unsigned long failures = cgrt__error_count();
  cgrt_status st = set->o.enqueue(set->o.user, s, d);
  if (st == CGRT_SUCCESS) return CGRT_SUCCESS;
  /* Quote the callback's cgrt failure when it had one; an older message is not its own. */
  if (cgrt__error_count() == failures)
    return cgrt__fail(CGRT_ERROR_CALLBACK_FAILED, "enqueue callback returned %s (no cgrt call failed in it)",
                      cgrt_status_name(st));
  return cgrt__fail(CGRT_ERROR_CALLBACK_FAILED, "enqueue callback returned %s: %s", cgrt_status_name(st),
                    cgrt_last_error());
}
