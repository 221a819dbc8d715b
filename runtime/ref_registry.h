/* Registry of C reference implementations of kernels (internal): what the CPU emulation
 * (runtime/emu/) runs for a launched kernel, and what cgrt_module_register_emulated adds.
 *
 * It lives in runtime/, below kernels/: no file under runtime/ includes anything under
 * kernels/ (docs/replay.md, "Layers"). The layer above fills it: kernels/registry.c
 * defines the built-in tables (cgrt__ref_builtin_tables, below) from the list in
 * kernels/ref_tables.h, as kernels/ defines the fatbin the runtime loads
 * (cgrt__kernels_fatbin); both are link-time inputs of //runtime.
 *
 * Every kernel in the embedded fatbin has a C reference implementation with the same
 * name and the same parameter list. The CPU emulation driver (runtime/emu/) runs the
 * reference when a kernel with that name is launched; tests compare GPU results
 * against the same references.
 *
 * A reference receives the launch geometry and the kernel parameters packed the way
 * the CUDA driver packs them (each parameter at its natural alignment, in order), so
 * that cuFuncGetParamInfo, kernel-node parameter patching and replay behave on the
 * emulation exactly as on a GPU. A reference may execute the whole grid in one call
 * (it is given grid and block) and must behave as the kernel does, including the
 * state it leaves in device memory (e.g. counters back at zero). */
#ifndef CGRT_RUNTIME_REF_REGISTRY_H
#define CGRT_RUNTIME_REF_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CGRT__REF_MAX_PARAMS 32
/* The driver's limit on a kernel's packed parameters (CUDA 12.1+, Volta and newer); also
 * bounds each parameter. */
#define CGRT__REF_MAX_PARAM_BYTES 32764

typedef struct cgrt__ref_launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
} cgrt__ref_launch;

/* params: the packed parameter buffer; param_offsets[i] is where parameter i starts. */
typedef void (*cgrt__ref_fn)(const cgrt__ref_launch *launch, const unsigned char *params,
                             const size_t *param_offsets);

typedef struct cgrt__ref_kernel {
  const char *name;        /* the kernel's symbol in the fatbin (extern "C" name) */
  size_t num_params;
  size_t param_sizes[CGRT__REF_MAX_PARAMS]; /* bytes; alignment = min(size, 8) */
  cgrt__ref_fn fn;
} cgrt__ref_kernel;

/* The built-in tables: cgrt__ref_builtin_tables[0 .. cgrt__ref_builtin_table_count), each
 * an array of entries ended by one whose name is NULL. Defined by kernels/registry.c. */
extern const cgrt__ref_kernel *const cgrt__ref_builtin_tables[];
extern const size_t cgrt__ref_builtin_table_count;

/* Finds a reference by name: first those registered at run time, then the built-in
 * tables (cgrt__ref_builtin_tables). NULL when unknown. The entry never changes
 * and stays valid for the life of the process, even when the name is registered again
 * (the name then leads to another entry). Thread-safe. */
const cgrt__ref_kernel *cgrt__ref_kernel_find(const char *name);

/* 0 when k is well formed: name and fn set, at most CGRT__REF_MAX_PARAMS parameters,
 * each of 1 to CGRT__REF_MAX_PARAM_BYTES bytes, packed size at most
 * CGRT__REF_MAX_PARAM_BYTES. Else -1, with *bad_param (when not NULL) the index of the
 * parameter at which the check failed (0 when the failure is not about one). */
int cgrt__ref_kernel_check(const cgrt__ref_kernel *k, size_t *bad_param);

/* Names beginning with this prefix are cgrt's own kernels (every entry of the built-in
 * tables has one): they are never registered at run time, so that no host reference
 * replaces the reference of an embedded kernel for the runtimes of the process. */
#define CGRT__REF_RESERVED_PREFIX "cgrt_"

/* 1 when `name` begins with CGRT__REF_RESERVED_PREFIX. */
int cgrt__ref_name_reserved(const char *name);

/* Adds a reference at run time (tests, foreign kernels on the emulation), or replaces
 * the one of that name. The struct is copied into an immutable entry; the name is not
 * copied (it must stay valid for the life of the process).
 * Returns 0; -1 when the entry is malformed (cgrt__ref_kernel_check); -2 when the table
 * is full (64 names, 1024 distinct entries over the process); -3 when the name is
 * reserved (cgrt__ref_name_reserved): nothing is registered. Thread-safe. */
int cgrt__ref_kernel_register(const cgrt__ref_kernel *k);

/* Computes the driver's packed layout for a kernel: offsets[i] and the total size.
 * Each parameter is aligned to min(size, 8) bytes. */
size_t cgrt__ref_param_layout(const cgrt__ref_kernel *k, size_t *offsets);

/* Reads parameter i of the packed buffer as a value of type T. */
#define CGRT__REF_PARAM(T, params, offsets, i) (*(const T *)(const void *)((params) + (offsets)[i]))

#ifdef __cplusplus
}
#endif
#endif
