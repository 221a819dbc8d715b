/* The DCP kernels (kernels/dcp/dcp.cu): one row per kernel, and only those. The DCP step
 * (runtime/dcp.c) looks them up by name and launches them with these block sizes; the C
 * references (kernels/dcp/ref.c) register one entry per row; tests/dcp iterate the rows.
 * Adding a kernel: a row here, its source in dcp.cu, its reference in ref.c. Plain C.
 *
 * X(name, threads, params, ref)
 *   name     the kernel's symbol (extern "C")
 *   threads  block size (the grid is per launch, see each kernel)
 *   params   its parameter count (the sizes are in ref.c's table)
 *   ref      its C reference in kernels/dcp/ref.c */
#ifndef CGRT_KERNELS_DCP_KERNEL_TABLE_H
#define CGRT_KERNELS_DCP_KERNEL_TABLE_H

/* Values per query head of an output (V of MLA). */
#define CGRT_DCP_DV 512

/* clang-format off */
#define CGRT__DCP_KERNELS(X)                       \
  X(cgrt_dcp_merge,     128, 8, merge_ref)         \
  X(cgrt_dcp_transpose, 128, 9, transpose_ref)     \
  X(cgrt_dcp_rescale,   128, 8, rescale_ref)
/* clang-format on */

typedef struct cgrt__dcp_kernel {
  const char *name;
  int threads;
  int params;
} cgrt__dcp_kernel;

#define CGRT__DCP_KERNEL_ROW(name, threads, params, ref) {#name, threads, params},

#endif /* CGRT_KERNELS_DCP_KERNEL_TABLE_H */
