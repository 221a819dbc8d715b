/* cgrt: capture segments — capture a repeated piece of a step once, append its copies.
 *
 * A decoder's step runs the same layer L times over different weights and KV caches.
 * Under stream capture the host still executes all L layers, once per captured bucket:
 * for a Python engine that is hundreds of framework calls per layer, and most of the
 * time a bucket set takes to capture. A segment lets the host capture one layer and have
 * cgrt append the other L - 1 to the same capture. A copy is the segment's nodes, in the
 * same order with the same edges (programmatic edges and kernel-node attributes
 * included), where every address inside a listed buffer (a remap's `from`) is moved to
 * the copy's buffer (its `to`); cgrt adds them to the capturing graph through the
 * driver (cuStreamGetCaptureInfo, cuGraphAddNode, cuStreamUpdateCaptureDependencies),
 * and what the stream captures next depends on the last copy, as it would on the last
 * layer. The graph set then indexes, instantiates and patches copies like any node.
 *
 *   cgrt_segment *s0, *s1;
 *   cgrt_segment_begin(rt, stream, &s0);  layer(0);  cgrt_segment_end(s0);
 *   cgrt_segment_begin(rt, stream, &s1);  layer(1);  cgrt_segment_end(s1);
 *   cgrt_segment_compare(s0, s1, remap_0_to_1, n);      // the contract, checked
 *   for (l = 2; l < L; l++) cgrt_segment_append(s1, remap_1_to_l, n);
 *   cgrt_segment_destroy(s0);  cgrt_segment_destroy(s1);
 *
 * The contract a copy relies on (it is what makes a copy equal to capturing the layer):
 *   - every layer launches the same work as the segment: the same kernels, launch
 *     shapes, attributes and parameter values, except addresses inside remapped buffers
 *     (no per-layer scalar such as a layer index among the parameters);
 *   - what the layers share (the residual stream, scratch, metadata) is the same buffer
 *     for every layer, or is listed as a remap (ping-pong activations);
 *   - every remap moves addresses by a multiple of CGRT_SEGMENT_ALIGN bytes (kernels
 *     specialize on pointer alignment: Triton on 16 bytes, vectorized and TMA loads on
 *     16-128), and the `from` ranges of one call do not overlap.
 * cgrt_segment_compare checks the contract on a layer captured for real: capture two
 * layers, compare the second with the first remapped, append the rest from either.
 *
 * What a copy remaps: every 8-byte word at an 8-byte-aligned offset of each kernel
 * parameter of 8 bytes or more (a pointer, or 8 bytes of a struct), a memset's
 * destination and a memcpy's device operands, when the value lies in [from, from +
 * bytes) of a remap (an end pointer, from + bytes, is not moved). A word of a struct
 * that only looks like such an address would be moved too; comparing against a layer
 * captured for real catches it. A kernel launched with `extra`-packed parameters is read
 * from the buffer its node owns (in cuFuncGetParamInfo's layout) and copied the same way.
 * Node types other than kernel, memset, 1-D memcpy and empty end the segment with
 * CGRT_ERROR_NOT_SUPPORTED.
 *
 * Lifetime: a segment belongs to one capture of one stream (the capture sequence's id);
 * appending or comparing after that capture ended is refused. Nodes the stream captures
 * through other streams it joined during the segment belong to it if they were added to
 * the capture graph between begin and end (a fork must join back before the end).
 *
 * Thread-safety: a segment is used by one thread at a time, the capturing one. All calls
 * are capture-safe: they enqueue nothing, synchronize nothing and only add nodes to the
 * capture (cgrt_segment_append). */
#ifndef CGRT_SEGMENT_H
#define CGRT_SEGMENT_H

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_status.h"
#include "cgrt/cgrt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A remap moves addresses by a multiple of this many bytes. */
#define CGRT_SEGMENT_ALIGN 256

typedef struct cgrt_segment cgrt_segment;

/* One buffer a copy uses in place of the segment's: addresses in [from, from + bytes)
 * become to + (address - from). */
typedef struct cgrt_remap {
  CUdeviceptr from;
  CUdeviceptr to;
  size_t bytes;
} cgrt_remap;

/* *capturing = 1 when `stream` is capturing (the capture is active), else 0.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (rt not live); CGRT_ERROR_INVALID_ARGUMENT
 * (capturing NULL); CGRT_ERROR_CAPTURING (the capture was invalidated); CGRT_ERROR_DRIVER.
 * Thread-safe, capture-safe. */
cgrt_status cgrt_stream_capturing(cgrt_runtime *rt, CUstream stream, int *capturing);

/* Opens a segment on `stream`, which must be capturing: the nodes the capture gains
 * until cgrt_segment_end are the segment. On success *out owns it (cgrt_segment_destroy);
 * on failure *out is NULL.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (rt not live); CGRT_ERROR_INVALID_ARGUMENT
 * (out NULL, the stream is not capturing); CGRT_ERROR_CAPTURING (the capture was
 * invalidated); CGRT_ERROR_OUT_OF_MEMORY; CGRT_ERROR_DRIVER. */
cgrt_status cgrt_segment_begin(cgrt_runtime *rt, CUstream stream, cgrt_segment **out);

/* Closes the segment: records its nodes (parameters copied into the segment), their
 * edges, and the stream's dependencies at this point. Ending twice is refused.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (ended
 * already, the stream's capture is another one or has ended); CGRT_ERROR_NOT_SUPPORTED (a
 * node cgrt cannot copy: the message names it); CGRT_ERROR_OUT_OF_MEMORY;
 * CGRT_ERROR_DRIVER. On failure the segment stays open-ended and unusable except for
 * destroy; the capture itself is unaffected. */
cgrt_status cgrt_segment_end(cgrt_segment *seg);

/* The number of nodes of an ended segment.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (count
 * NULL, not ended). Thread-safe with other reads of the segment. */
cgrt_status cgrt_segment_nodes(const cgrt_segment *seg, size_t *count);

/* Appends a copy of the ended segment to its stream's capture, after what the stream
 * captured so far, with `remaps` applied (num_remaps may be 0: the same buffers again).
 * The capture's dependencies then are the copy's last nodes.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (not
 * ended, the capture ended or is another one, remaps NULL with num_remaps > 0, a remap
 * of 0 bytes, wrapping past the address space, moving by other than a multiple of
 * CGRT_SEGMENT_ALIGN, overlapping `from` ranges: the message names the remap);
 * CGRT_ERROR_CAPTURING (the capture was invalidated); CGRT_ERROR_OUT_OF_MEMORY;
 * CGRT_ERROR_DRIVER (the driver refused a node: nodes added before it stay in the
 * capture graph, unreachable from the stream, and the stream's dependencies are
 * unchanged; end the capture and discard it). */
cgrt_status cgrt_segment_append(cgrt_segment *seg, const cgrt_remap *remaps, size_t num_remaps);

/* Checks that `other` (a later layer, captured for real) is `seg` remapped: the same
 * number of nodes, and node by node in topological order the same type, kernel, launch
 * shape, parameter bytes (seg's remapped), memset/memcpy operands (seg's remapped) and
 * edges. Both must be ended segments of the same capture.
 * Statuses: CGRT_SUCCESS (equal); CGRT_ERROR_NOT_SUPPORTED (they differ: the message
 * names the first difference, node, kernel, parameter and byte, with both values);
 * CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (not ended, other captures,
 * invalid remaps as for cgrt_segment_append); CGRT_ERROR_OUT_OF_MEMORY. Reads only. */
cgrt_status cgrt_segment_compare(const cgrt_segment *seg, const cgrt_segment *other,
                                 const cgrt_remap *remaps, size_t num_remaps);

/* Destroys a segment (NULL and a segment destroyed already: no-op). The nodes it
 * captured or appended stay in the capture. A segment still alive when its runtime is
 * destroyed is destroyed with it (a warning is logged). */
void cgrt_segment_destroy(cgrt_segment *seg);

#ifdef __cplusplus
}
#endif
#endif
