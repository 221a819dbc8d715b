/* cgrt: the host's own kernels through cgrt's driver table.
 *
 * A host engine whose decode step launches its own kernels (captured by a graph set's
 * enqueue callback) can load them here, so the same host code runs on a GPU and on cgrt's
 * CPU emulation of the driver: on a GPU these are cuModuleLoadData, cuModuleGetFunction
 * and cuLaunchKernel on the runtime's context; on the emulation a kernel runs its C
 * reference, registered by name with cgrt_emulated_kernel_register. */
#ifndef CGRT_MODULE_H
#define CGRT_MODULE_H

#include "cgrt/cgrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_module cgrt_module;

/* Loads a module image (fatbin, cubin or PTX, as cuModuleLoadData takes it) on the
 * runtime's context. The image is read during the call only. On success *out owns the
 * module; release it with cgrt_module_unload. A module still loaded when its runtime is
 * destroyed is unloaded with it (logged at CGRT_LOG_WARN); its handle then answers
 * CGRT_ERROR_INVALID_HANDLE everywhere.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (NULL
 * image or out); CGRT_ERROR_UNSUPPORTED_DEVICE (the image has no code for this device:
 * CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_IMAGE, ...); CGRT_ERROR_CAPTURING
 * (called while the calling thread captures a graph, e.g. from an enqueue callback under
 * capture; nothing is loaded); CGRT_ERROR_OUT_OF_MEMORY; CGRT_ERROR_DRIVER. Thread-safe.
 * Must not be called during capture. */
cgrt_status cgrt_module_load(cgrt_runtime *rt, const void *image, cgrt_module **out);

/* Unloads a module; functions taken from it become invalid. NULL is a no-op.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE (not a live module: unloaded twice
 * or never loaded; nothing is read), CGRT_ERROR_CAPTURING (the calling thread captures a
 * graph: nothing is unloaded, the handle stays live), CGRT_ERROR_DRIVER (the module is
 * released anyway).
 * Not thread-safe with launches of its functions. Must not be called during capture. */
cgrt_status cgrt_module_unload(cgrt_module *module);

/* Looks up an extern "C" kernel by name. The handle lives as long as the module.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE (not a live module);
 * CGRT_ERROR_INVALID_ARGUMENT (NULL name or out, an empty name; no such
 * kernel, or on the emulation no reference registered under that name: the message says
 * which); CGRT_ERROR_DRIVER. Thread-safe. May be called during capture. */
cgrt_status cgrt_module_function(cgrt_module *module, const char *name, CUfunction *out);

/* Launches `fn` on `stream` with cuLaunchKernel's packing (args[i] points to parameter
 * i). Under stream capture this records a kernel node. Success path: no allocation.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (NULL fn,
 * a zero dimension); CGRT_ERROR_DRIVER (message names the CUresult; during capture the
 * capture is invalidated as the driver does). Thread-safe. May be called during capture. */
cgrt_status cgrt_launch_kernel(cgrt_runtime *rt, CUfunction fn, unsigned grid_x, unsigned grid_y,
                               unsigned grid_z, unsigned block_x, unsigned block_y, unsigned block_z,
                               unsigned shared_bytes, CUstream stream, void **args);

/* ---- C references for the emulation ---------------------------------------------- */

typedef struct cgrt_emulated_launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
} cgrt_emulated_launch;

/* Runs a whole grid of a kernel on the host. `params` is the packed parameter buffer
 * (each parameter at its natural alignment, as the driver packs them); param_offsets[i]
 * is where parameter i starts. It must leave memory exactly as the kernel would. */
typedef void (*cgrt_emulated_kernel_fn)(const cgrt_emulated_launch *launch, const unsigned char *params,
                                        const size_t *param_offsets);

#define CGRT_EMULATED_MAX_PARAMS 32
/* The driver's limit on a kernel's parameters, packed (CUDA 12.1+). */
#define CGRT_EMULATED_MAX_PARAM_BYTES 32764

/* Registers (or replaces) the C reference the emulation runs for kernel `name`, with the
 * sizes in bytes of its num_params parameters. Process-wide; the name is copied. Register
 * before cgrt_module_function looks the kernel up: a function handle keeps the reference
 * it was looked up with (a replacement serves later lookups; launches already running,
 * or of handles taken before, are unaffected). Harmless on a GPU (never used there).
 * Names beginning with "cgrt_" are reserved for cgrt's own kernels, whose references are
 * built in: a registration under such a name is refused and registers nothing (it
 * would replace an embedded kernel for every runtime of the process).
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_ARGUMENT (a reserved name; NULL name or
 * fn, num_params above CGRT_EMULATED_MAX_PARAMS, a size of 0 or above
 * CGRT_EMULATED_MAX_PARAM_BYTES, or a packed size, each parameter at min(size, 8)-byte
 * alignment, above CGRT_EMULATED_MAX_PARAM_BYTES: the message names the parameter;
 * nothing is registered); CGRT_ERROR_OUT_OF_MEMORY (the table is full: 64 names, 1024 distinct
 * registrations per process). Thread-safe, also with lookups and launches of the same
 * name. */
cgrt_status cgrt_emulated_kernel_register(const char *name, size_t num_params, const size_t *param_sizes,
                                          cgrt_emulated_kernel_fn fn);

#ifdef __cplusplus
}
#endif
#endif
