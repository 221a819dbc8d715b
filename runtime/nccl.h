/* The NCCL table: every NCCL call cgrt makes goes through one of these.
 *
 * One X-macro list names each entry point cgrt uses, whether a library without it is
 * usable, its parameter list and its argument list. From that list come:
 *   - the table type (cgrt__nccl),
 *   - the real table, resolved once from libnccl.so.2 with dlopen (runtime/nccl_lib.c),
 *   - the emulated NCCL of the CPU emulation (runtime/emu/emu_nccl.c): ranks are
 *     threads of one process, collectives run as host nodes on emulated streams (so
 *     they are captured into emulated graphs and replayed),
 *   - the fault-injection wrapper (runtime/nccl_fault.c), driven by the same plan as
 *     the driver's (cgrt_fault.h).
 *
 * NCCL's header is not needed to build cgrt: the few types below are declared from
 * NCCL's documented ABI (nccl.h of NCCL 2.17 and later: ncclResult_t, ncclDataType_t,
 * ncclRedOp_t, ncclUniqueId, ncclConfig_t of version 2.17; the values are part of
 * NCCL's stable C ABI, see docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/types.html).
 * A cudaStream_t is a CUstream. Internal header: not installed. */
#ifndef CGRT_RUNTIME_NCCL_H
#define CGRT_RUNTIME_NCCL_H

#include <cuda.h>
#include <limits.h>
#include <stddef.h>

#include "runtime/driver.h" /* CGRT__REQUIRED */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm *ncclComm_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9
} ncclDataType_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

/* ncclConfig_t as of NCCL 2.17 (newer libraries accept it: they read `size` bytes and
 * the fields that `version` has). NCCL_CONFIG_INITIALIZER's values. */
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
} cgrt__nccl_config;
#define CGRT__NCCL_CONFIG_MAGIC 0xcafebeefu
#define CGRT__NCCL_CONFIG_VERSION 21700u /* NCCL_VERSION(2, 17, 0) */
#define CGRT__NCCL_UNDEF_INT INT_MIN

/* Oldest NCCL cgrt accepts: ncclCommInitRankConfig with ncclConfig_t.splitShare. */
#define CGRT__NCCL_MIN_VERSION 21700

/* X(symbol, required, counted, return type, (parameters), (arguments))
 * counted: 1 for the calls the fault wrapper counts and may fail (those returning an
 * ncclResult_t that do work), 0 for those that only report (version, error strings),
 * 2 for ncclGroupEnd, which a failing call still runs first: NCCL closes the group
 * whatever it reports, and a group left open would unbalance the thread's groups. */
#define CGRT_NCCL_API(X)                                                                          \
  X(ncclGetVersion, CGRT__REQUIRED, 0, ncclResult_t, (int *version), (version))                   \
  X(ncclGetErrorString, CGRT__REQUIRED, 0, const char *, (ncclResult_t result), (result))          \
  X(ncclGetUniqueId, CGRT__REQUIRED, 1, ncclResult_t, (ncclUniqueId * uniqueId), (uniqueId))      \
  X(ncclCommInitRankConfig, CGRT__REQUIRED, 1, ncclResult_t,                                      \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, cgrt__nccl_config *config),     \
    (comm, nranks, commId, rank, config))                                                         \
  X(ncclCommDestroy, CGRT__REQUIRED, 1, ncclResult_t, (ncclComm_t comm), (comm))                  \
  X(ncclCommAbort, CGRT__REQUIRED, 1, ncclResult_t, (ncclComm_t comm), (comm))                    \
  X(ncclCommGetAsyncError, CGRT__REQUIRED, 1, ncclResult_t,                                       \
    (ncclComm_t comm, ncclResult_t *asyncError), (comm, asyncError))                              \
  X(ncclAllGather, CGRT__REQUIRED, 1, ncclResult_t,                                               \
    (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,             \
     ncclComm_t comm, CUstream stream),                                                           \
    (sendbuff, recvbuff, sendcount, datatype, comm, stream))                                      \
  X(ncclReduceScatter, CGRT__REQUIRED, 1, ncclResult_t,                                           \
    (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype,             \
     ncclRedOp_t op, ncclComm_t comm, CUstream stream),                                           \
    (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))                                  \
  X(ncclAllReduce, CGRT__REQUIRED, 1, ncclResult_t,                                               \
    (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, \
     ncclComm_t comm, CUstream stream),                                                           \
    (sendbuff, recvbuff, count, datatype, op, comm, stream))                                      \
  X(ncclSend, CGRT__REQUIRED, 1, ncclResult_t,                                                    \
    (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,      \
     CUstream stream),                                                                            \
    (sendbuff, count, datatype, peer, comm, stream))                                              \
  X(ncclRecv, CGRT__REQUIRED, 1, ncclResult_t,                                                    \
    (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,            \
     CUstream stream),                                                                            \
    (recvbuff, count, datatype, peer, comm, stream))                                              \
  X(ncclGroupStart, CGRT__REQUIRED, 1, ncclResult_t, (void), ())                                  \
  X(ncclGroupEnd, CGRT__REQUIRED, 2, ncclResult_t, (void), ())

typedef struct cgrt__nccl {
  const char *name; /* "nccl", "emulated", "fault(nccl)", "fault(emulated)" */
  int is_emulated;
  int version;      /* ncclGetVersion, e.g. 22703 */
  char path[256];   /* the library opened ("" for the emulation) */
#define CGRT__NCCL_FIELD(sym, req, counted, ret, params, args) ret(*sym) params;
  CGRT_NCCL_API(CGRT__NCCL_FIELD)
#undef CGRT__NCCL_FIELD
} cgrt__nccl;

/* The real NCCL, resolved once per distinct `library` (NULL: the usual places, in
 * order: libnccl.so.2 through the loader's search path, then the lib/ folder of the
 * NVIDIA NCCL pip package (nvidia/nccl/lib/libnccl.so.2) under the site-packages
 * folders of python3.8 .. 3.13 in /usr/local/lib and /usr/lib, then
 * /usr/local/cuda/lib{,64}, /usr/local/nccl/lib and /usr/lib/x86_64-linux-gnu). Returns NULL with a message
 * naming every place tried (or the missing symbol, or the version too old) in msg.
 * Thread-safe; later calls with the same library return the same table or failure. */
const cgrt__nccl *cgrt__nccl_real(const char *library, char *msg, size_t msg_len);

/* The emulated NCCL (runtime/emu/emu_nccl.c): ranks are threads of this process over
 * the emulated driver; a communicator's collectives meet the other ranks' at run time
 * (eager: inside the call; captured: when the graph runs). Always available. */
const cgrt__nccl *cgrt__nccl_emulated(void);

/* The fault-injection wrapper around base (runtime/nccl_fault.c): counts the calls and
 * fails the one the plan of cgrt_fault_set chooses (plan.symbol may name an NCCL entry
 * point; plan.result is then the ncclResult_t, 0 meaning ncclInternalError).
 * ncclGetErrorString and ncclGetVersion are never counted. NULL when CGRT__FAULT_SLOTS
 * (4) other bases are wrapped already (runtime/fault_slots.h). */
const cgrt__nccl *cgrt__nccl_fault(const cgrt__nccl *base);

/* "ncclSystemError" etc.; "ncclResult(N)" kept in a static table for other values. */
const char *cgrt__nccl_result_name(ncclResult_t r);

#ifdef __cplusplus
}
#endif
#endif
