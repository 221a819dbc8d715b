/* cgrt: the CUDA driver types that appear in cgrt's public headers.
 *
 * When <cuda.h> was included first, its definitions are used. Otherwise the opaque
 * handle types are declared here exactly as <cuda.h> declares them (C11 allows the
 * repeated identical typedef), so hosts need not include the toolkit's headers. */
#ifndef CGRT_TYPES_H
#define CGRT_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifndef __cuda_cuda_h__
typedef struct CUstream_st *CUstream;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraphExec_st *CUgraphExec;
#if defined(_WIN64) || defined(__LP64__)
typedef unsigned long long CUdeviceptr;
#else
typedef unsigned int CUdeviceptr;
#endif
#endif

#endif
