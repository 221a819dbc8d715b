/* The parameter lists of the graph-meta kernels (kernels/graph_meta.cu; C reference
 * kernels/graph_meta_ref.c), named for the code that launches and patches them (graphs/).
 * C and C++ (nvcc). Internal.
 *
 * The contract between the kernels and graphs/:
 *   - num_reqs is parameter 0 (CGRT__META_NUM_REQS, a 4-byte int) of every graph-meta
 *     kernel that takes it as a parameter: prepare, advance and while_begin. A step
 *     rewrites that parameter of the captured nodes in place, by byte offset (host:
 *     graphs/param_index.c gx_index_set_reqs; device: the num_reqs group of the patch
 *     table, graphs/device_patch.c). advance_while takes no num_reqs: it reads the
 *     launch's from the loop's state (state[1], written by while_begin), so the WHILE
 *     body never changes between launches.
 *   - The conditional handle of the WHILE kernels (while_begin, advance_while) is their
 *     last parameter (CGRT__META_WHILE_BEGIN_HANDLE, CGRT__META_ADVANCE_WHILE_HANDLE): an
 *     opaque 8-byte value, never a pointer; the parameter index skips it.
 *   - Every other 8-byte parameter is a device pointer into a buffer of the set (or the
 *     set's own loop state), found and patched like any kernel's pointers.
 *
 * One list per kernel, X(NAME, bytes), in parameter order: it gives the positions
 * (CGRT__META_<KERNEL>_<NAME>, and CGRT__META_<KERNEL>_NPARAMS) and the sizes of the
 * reference table's rows. The kernels' signatures in graph_meta.cu follow the lists
 * (checked there at compile time: count and size of every parameter). */
#ifndef CGRT_KERNELS_GRAPH_META_H
#define CGRT_KERNELS_GRAPH_META_H

/* cgrt_graph_meta_prepare: per-request metadata -> per-row metadata, inert padding. */
#define CGRT__META_PREPARE_PARAMS(X) \
  X(PREPARE_NUM_REQS, 4)             \
  X(PREPARE_PADDED_ROWS, 4)          \
  X(PREPARE_BLOCK_LEN, 4)            \
  X(PREPARE_BLOCK_SIZE, 4)           \
  X(PREPARE_MAX_BLOCKS, 4)           \
  X(PREPARE_REQ_SEQ_LENS, 8)         \
  X(PREPARE_REQ_POSITIONS, 8)        \
  X(PREPARE_BLOCK_TABLE, 8)          \
  X(PREPARE_SEQ_LENS, 8)             \
  X(PREPARE_POSITIONS, 8)            \
  X(PREPARE_SLOT_MAPPING, 8)

/* cgrt_graph_meta_advance: one draft step forward (unrolled draft loops). */
#define CGRT__META_ADVANCE_PARAMS(X) \
  X(ADVANCE_NUM_REQS, 4)             \
  X(ADVANCE_PADDED_ROWS, 4)          \
  X(ADVANCE_MAX_MODEL_LEN, 4)        \
  X(ADVANCE_BLOCK_SIZE, 4)           \
  X(ADVANCE_MAX_BLOCKS, 4)           \
  X(ADVANCE_BLOCK_TABLE, 8)          \
  X(ADVANCE_SEQ_LENS, 8)             \
  X(ADVANCE_POSITIONS, 8)            \
  X(ADVANCE_SLOT_MAPPING, 8)

/* cgrt_graph_meta_while_begin: the WHILE loop's state and first condition. */
#define CGRT__META_WHILE_BEGIN_PARAMS(X) \
  X(WHILE_BEGIN_NUM_REQS, 4)             \
  X(WHILE_BEGIN_REQ_SEQ_LENS, 8)         \
  X(WHILE_BEGIN_DRAFT_REMAINING, 8)      \
  X(WHILE_BEGIN_STATE, 8)                \
  X(WHILE_BEGIN_HANDLE, 8)

/* cgrt_graph_meta_advance_while: last node of the WHILE body. */
#define CGRT__META_ADVANCE_WHILE_PARAMS(X) \
  X(ADVANCE_WHILE_PADDED_ROWS, 4)          \
  X(ADVANCE_WHILE_STEPS, 4)                \
  X(ADVANCE_WHILE_MAX_MODEL_LEN, 4)        \
  X(ADVANCE_WHILE_BLOCK_SIZE, 4)           \
  X(ADVANCE_WHILE_MAX_BLOCKS, 4)           \
  X(ADVANCE_WHILE_BLOCK_TABLE, 8)          \
  X(ADVANCE_WHILE_SEQ_LENS, 8)             \
  X(ADVANCE_WHILE_POSITIONS, 8)            \
  X(ADVANCE_WHILE_SLOT_MAPPING, 8)         \
  X(ADVANCE_WHILE_DRAFT_REMAINING, 8)      \
  X(ADVANCE_WHILE_STATE, 8)                \
  X(ADVANCE_WHILE_HANDLE, 8)

#define CGRT__META_POSITION(name, bytes) CGRT__META_##name,
enum { CGRT__META_PREPARE_PARAMS(CGRT__META_POSITION) CGRT__META_PREPARE_NPARAMS };
enum { CGRT__META_ADVANCE_PARAMS(CGRT__META_POSITION) CGRT__META_ADVANCE_NPARAMS };
enum { CGRT__META_WHILE_BEGIN_PARAMS(CGRT__META_POSITION) CGRT__META_WHILE_BEGIN_NPARAMS };
enum { CGRT__META_ADVANCE_WHILE_PARAMS(CGRT__META_POSITION) CGRT__META_ADVANCE_WHILE_NPARAMS };
#undef CGRT__META_POSITION

/* The sizes of a list, for an initializer ({CGRT__META_PREPARE_PARAMS(CGRT__META_BYTES)}). */
#define CGRT__META_BYTES(name, bytes) bytes,

/* num_reqs: parameter 0 of prepare, advance and while_begin, an int (the contract above). */
#define CGRT__META_NUM_REQS 0
#define CGRT__META_NUM_REQS_BYTES 4
/* Most parameters of a graph-meta kernel. */
#define CGRT__META_MAX_PARAMS 12

#ifdef __cplusplus
#define CGRT__META_ASSERT(c, m) static_assert(c, m)
#else
#define CGRT__META_ASSERT(c, m) _Static_assert(c, m)
#endif
CGRT__META_ASSERT(CGRT__META_PREPARE_NUM_REQS == CGRT__META_NUM_REQS &&
                      CGRT__META_ADVANCE_NUM_REQS == CGRT__META_NUM_REQS &&
                      CGRT__META_WHILE_BEGIN_NUM_REQS == CGRT__META_NUM_REQS,
                  "num_reqs is parameter 0 of every graph-meta kernel that takes it");
CGRT__META_ASSERT(CGRT__META_WHILE_BEGIN_HANDLE == CGRT__META_WHILE_BEGIN_NPARAMS - 1 &&
                      CGRT__META_ADVANCE_WHILE_HANDLE == CGRT__META_ADVANCE_WHILE_NPARAMS - 1,
                  "the conditional handle is the last parameter of the WHILE kernels");
CGRT__META_ASSERT(CGRT__META_PREPARE_NPARAMS <= CGRT__META_MAX_PARAMS &&
                      CGRT__META_ADVANCE_NPARAMS <= CGRT__META_MAX_PARAMS &&
                      CGRT__META_WHILE_BEGIN_NPARAMS <= CGRT__META_MAX_PARAMS &&
                      CGRT__META_ADVANCE_WHILE_NPARAMS <= CGRT__META_MAX_PARAMS,
                  "CGRT__META_MAX_PARAMS");
#undef CGRT__META_ASSERT

#endif
