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
  cgrt_status st = set->o.enqueue(set->o.user, s, d);
  if (st != CGRT_SUCCESS) {
    const char *msg = cgrt_last_error();
    return cgrt__fail(CGRT_ERROR_CALLBACK_FAILED, "enqueue callback returned %s%s%s",
                      cgrt_status_name(st), msg && msg[0] ? ": " : "", msg ? msg : "");
  }
  return CGRT_SUCCESS;
}
