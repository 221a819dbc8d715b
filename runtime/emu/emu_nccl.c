/* The emulated NCCL: the table of runtime/nccl.h over the emulated driver, for CI.
 *
 * Ranks are threads of this process. A unique id names a clique; ncclCommInitRankConfig
 * joins it without blocking (as a non-blocking communicator: ncclCommGetAsyncError says
 * ncclInProgress until every rank has joined). A collective or a group of sends and
 * receives is enqueued as a host function on the stream (cuLaunchHostFunc of the
 * emulated driver): eager, it runs inside the call; under capture it becomes a host node
 * of the graph and runs at each launch. When it runs, the ranks meet: each posts its
 * buffers, waits for all, computes its own result from the others' buffers (reductions
 * in rank order 0..n-1, so the bits do not depend on timing), and waits for all again
 * before its buffers may change. The k-th operation run on each rank meet each other.
 *
 * Failures: ncclCommAbort (or ncclCommDestroy before the others are done) marks the
 * clique aborted and wakes every rank waiting in it; their operation is dropped and
 * their communicator's asynchronous error becomes ncclRemoteError, as NCCL reports a
 * peer's failure. A rank that never arrives is waited for at most EMU_NCCL_BACKSTOP_S
 * seconds (a guard against a broken test; real NCCL would hang), then the clique is
 * aborted the same way. Collectives inside ncclGroupStart/End are not emulated
 * (ncclInvalidUsage): cgrt groups only sends and receives. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/bf16.h"
#include "runtime/emu/emu_internal.h"
#include "runtime/nccl.h"

#define EMU_NCCL_BACKSTOP_S 60
#define EMU_NCCL_VERSION 22703 /* reports itself as NCCL 2.27.3 */
static const char k_magic[8] = "cgrtemu";

enum { OP_ALLGATHER = 1, OP_REDUCE_SCATTER, OP_ALLREDUCE, OP_P2P };

typedef struct p2p {
  int send; /* 1: send to peer; 0: receive from peer */
  int peer;
  void *buf;
  size_t bytes;
} p2p;

typedef struct op {
  int kind;
  struct ncclComm *comm;
  const void *send;
  void *recv;
  size_t count; /* elements: sendcount (all-gather), recvcount (reduce-scatter), count (all-reduce) */
  ncclDataType_t dtype;
  ncclRedOp_t redop;
  p2p *p2ps;
  size_t np2p;
  struct op *next; /* the communicator's captured operations */
} op;

typedef struct clique {
  uint64_t serial;
  int nranks, joined, refs;
  int aborted;
  unsigned long gen; /* barrier generation */
  int arrived;
  const op **posts; /* [nranks]: each rank's operation while they meet */
  struct clique *next;
} clique;

struct ncclComm {
  clique *c;
  int rank, nranks;
  ncclResult_t async_err; /* under g_mu */
  op *ops;                /* operations recorded into graphs, freed with the communicator */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static clique *g_cliques;
static uint64_t g_serial;

static void set_err(struct ncclComm *c, ncclResult_t r) {
  if (c->async_err == ncclSuccess || c->async_err == ncclInProgress) c->async_err = r;
}

static void abort_clique(clique *q) {
  q->aborted = 1;
  pthread_cond_broadcast(&g_cv);
}

static size_t dtype_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

/* ---- version, errors, ids ---- */
static ncclResult_t e_ncclGetVersion(int *version) {
  if (!version) return ncclInvalidArgument;
  *version = EMU_NCCL_VERSION;
  return ncclSuccess;
}

static const char *e_ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

static ncclResult_t e_ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return ncclInvalidArgument;
  memset(id, 0, sizeof *id);
  memcpy(id->internal, k_magic, sizeof k_magic);
  pthread_mutex_lock(&g_mu);
  uint64_t s = ++g_serial;
  pthread_mutex_unlock(&g_mu);
  memcpy(id->internal + 8, &s, sizeof s);
  return ncclSuccess;
}

/* ---- communicators ---- */
static ncclResult_t e_ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                             cgrt__nccl_config *config) {
  if (!comm || nranks < 1 || rank < 0 || rank >= nranks || memcmp(id.internal, k_magic, sizeof k_magic) != 0)
    return ncclInvalidArgument;
  if (config && (config->magic != CGRT__NCCL_CONFIG_MAGIC || config->size < sizeof(size_t) + 8))
    return ncclInvalidArgument;
  uint64_t serial;
  memcpy(&serial, id.internal + 8, sizeof serial);
  struct ncclComm *c = calloc(1, sizeof *c);
  if (!c) return ncclSystemError;
  ncclResult_t r = ncclSuccess;
  pthread_mutex_lock(&g_mu);
  clique *q = g_cliques;
  while (q && q->serial != serial) q = q->next;
  if (!q) {
    q = calloc(1, sizeof *q);
    const op **posts = calloc((size_t)nranks, sizeof *posts);
    if (!q || !posts) {
      free(q);
      free(posts);
      r = ncclSystemError;
      goto out;
    }
    q->serial = serial;
    q->nranks = nranks;
    q->posts = posts;
    q->next = g_cliques;
    g_cliques = q;
  }
  if (q->nranks != nranks || q->aborted || q->joined == nranks) {
    r = q->aborted ? ncclRemoteError : ncclInvalidUsage;
    goto out;
  }
  q->joined++;
  q->refs++;
  c->c = q;
  c->rank = rank;
  c->nranks = nranks;
  c->async_err = ncclSuccess;
  pthread_cond_broadcast(&g_cv);
out:
  pthread_mutex_unlock(&g_mu);
  if (r != ncclSuccess) {
    free(c);
    return r;
  }
  *comm = c;
  return ncclSuccess;
}

static ncclResult_t e_ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err) {
  if (!comm || !err) return ncclInvalidArgument;
  pthread_mutex_lock(&g_mu);
  if (comm->c->aborted) set_err(comm, ncclRemoteError);
  *err = comm->async_err != ncclSuccess ? comm->async_err
         : comm->c->joined < comm->nranks ? ncclInProgress : ncclSuccess;
  pthread_mutex_unlock(&g_mu);
  return ncclSuccess;
}

static void release(struct ncclComm *c, int abort) {
  pthread_mutex_lock(&g_mu);
  clique *q = c->c;
  if (abort || q->joined < q->nranks) abort_clique(q);
  if (--q->refs == 0) {
    for (clique **pp = &g_cliques; *pp; pp = &(*pp)->next)
      if (*pp == q) {
        *pp = q->next;
        break;
      }
    free(q->posts);
    free(q);
  }
  pthread_mutex_unlock(&g_mu);
  for (op *o = c->ops, *n; o; o = n) {
    n = o->next;
    free(o->p2ps);
    free(o);
  }
  free(c);
}

static ncclResult_t e_ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  release(comm, 0);
  return ncclSuccess;
}

static ncclResult_t e_ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  release(comm, 1);
  return ncclSuccess;
}

/* ---- meeting the other ranks ---- */
/* Waits until every rank of q arrived at this barrier; 0, or -1 when the clique is (or
 * gets) aborted. `leaving`: the second barrier of an operation, which every rank has
 * entered (they all passed the first): it waits for all of them even when the clique
 * was aborted meanwhile, since until then they may read each other's buffers (only the
 * backstop ends it early). g_mu held. */
static int barrier(clique *q, int leaving) {
  if (q->aborted && !leaving) return -1;
  unsigned long gen = q->gen;
  if (++q->arrived == q->nranks) {
    q->arrived = 0;
    q->gen++;
    pthread_cond_broadcast(&g_cv);
    return 0;
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += EMU_NCCL_BACKSTOP_S;
  while (q->gen == gen && (leaving || !q->aborted)) {
    if (pthread_cond_timedwait(&g_cv, &g_mu, &until) == ETIMEDOUT && q->gen == gen) {
      abort_clique(q);
      break;
    }
  }
  return q->gen != gen ? 0 : -1;
}

static double load(const void *p, size_t i, ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return ((const int8_t *)p)[i];
    case ncclUint8: return ((const uint8_t *)p)[i];
    case ncclInt32: return ((const int32_t *)p)[i];
    case ncclUint32: return ((const uint32_t *)p)[i];
    case ncclFloat32: return ((const float *)p)[i];
    case ncclFloat64: return ((const double *)p)[i];
    case ncclBfloat16: return cgrt__bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
  }
}

static void store(void *p, size_t i, ncclDataType_t t, double v) {
  switch (t) {
    case ncclInt8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ncclUint8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ncclInt32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ncclUint32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case ncclFloat32: ((float *)p)[i] = (float)v; break;
    case ncclFloat64: ((double *)p)[i] = v; break;
    case ncclBfloat16: ((uint16_t *)p)[i] = cgrt__f32_to_bf16((float)v); break;
    default: break;
  }
}

/* Element i of the reduction over ranks 0..n-1 of posts[r]->send at element offset
 * `at`, accumulated in the element type (bf16 and fp32 round after each addition, as a
 * ring reduction in that type does). */
static void reduce_into(void *dst, size_t di, const op *const *posts, int n, size_t at, const op *me) {
  const ncclDataType_t t = me->dtype;
  double acc = load(posts[0]->send, at, t);
  for (int r = 1; r < n; r++) {
    double v = load(posts[r]->send, at, t);
    switch (me->redop) {
      case ncclSum: case ncclAvg: acc = acc + v; break;
      case ncclProd: acc = acc * v; break;
      case ncclMax: acc = v > acc ? v : acc; break;
      default: acc = v < acc ? v : acc; break;
    }
    if (t == ncclFloat32) acc = (float)acc;
    if (t == ncclBfloat16) acc = cgrt__bf16_to_f32(cgrt__f32_to_bf16((float)acc));
  }
  if (me->redop == ncclAvg) acc /= n;
  store(dst, di, t, acc);
}

/* This rank's share of the operation, all ranks' posts in place. */
static void compute(const op *me, const op *const *posts, int n, int rank) {
  const size_t es = dtype_size(me->dtype);
  switch (me->kind) {
    case OP_ALLGATHER:
      for (int r = 0; r < n; r++)
        if ((char *)me->recv + (size_t)r * me->count * es != (const char *)posts[r]->send)
          memmove((char *)me->recv + (size_t)r * me->count * es, posts[r]->send, me->count * es);
      break;
    case OP_REDUCE_SCATTER:
      for (size_t i = 0; i < me->count; i++) reduce_into(me->recv, i, posts, n, (size_t)rank * me->count + i, me);
      break;
    case OP_ALLREDUCE: {
      /* The result goes to a scratch copy first: recv may alias this rank's send. */
      void *tmp = malloc(me->count > 0 ? me->count * es : 1);
      if (!tmp) return;
      for (size_t i = 0; i < me->count; i++) reduce_into(tmp, i, posts, n, i, me);
      memcpy(me->recv, tmp, me->count * es);
      free(tmp);
      break;
    }
    default: /* OP_P2P: the k-th receive from p takes the k-th send of p to this rank */
      for (size_t i = 0; i < me->np2p; i++) {
        const p2p *rv = &me->p2ps[i];
        if (rv->send) continue;
        size_t k = 0;
        for (size_t j = 0; j < i; j++) k += !me->p2ps[j].send && me->p2ps[j].peer == rv->peer;
        const op *peer = posts[rv->peer];
        for (size_t j = 0; j < peer->np2p; j++) {
          const p2p *sd = &peer->p2ps[j];
          if (!sd->send || sd->peer != rank) continue;
          if (k-- == 0) {
            memmove(rv->buf, sd->buf, rv->bytes < sd->bytes ? rv->bytes : sd->bytes);
            break;
          }
        }
      }
      break;
  }
}

/* 1 when the posts of all ranks describe the same operation (kinds and sizes agree;
 * for sends and receives: every receive has its matching send of the same size). */
static int posts_agree(const op *const *posts, int n) {
  for (int r = 1; r < n; r++)
    if (posts[r]->kind != posts[0]->kind || posts[r]->count != posts[0]->count ||
        posts[r]->dtype != posts[0]->dtype || posts[r]->redop != posts[0]->redop)
      return 0;
  if (posts[0]->kind != OP_P2P) return 1;
  for (int r = 0; r < n; r++)
    for (int p = 0; p < n; p++) {
      /* the sends of r to p and the receives of p from r, in order, same sizes */
      size_t si = 0, ri = 0;
      const op *a = posts[r], *b = posts[p];
      for (;;) {
        while (si < a->np2p && !(a->p2ps[si].send && a->p2ps[si].peer == p)) si++;
        while (ri < b->np2p && !(!b->p2ps[ri].send && b->p2ps[ri].peer == r)) ri++;
        if (si == a->np2p || ri == b->np2p) {
          if (si != a->np2p || ri != b->np2p) return 0;
          break;
        }
        if (a->p2ps[si].bytes != b->p2ps[ri].bytes) return 0;
        si++;
        ri++;
      }
    }
  return 1;
}

/* The host function of every operation: meets the other ranks and does this rank's
 * share. Failures go to the communicator's asynchronous error. */
static void CUDA_CB run_op(void *user) {
  const op *me = user;
  struct ncclComm *c = me->comm;
  pthread_mutex_lock(&g_mu);
  clique *q = c->c;
  if (q->joined < q->nranks) {
    set_err(c, ncclInvalidUsage); /* used before ncclCommGetAsyncError said ncclSuccess */
    abort_clique(q);
    pthread_mutex_unlock(&g_mu);
    return;
  }
  q->posts[c->rank] = me;
  if (barrier(q, 0) != 0) {
    set_err(c, ncclRemoteError);
    pthread_mutex_unlock(&g_mu);
    return;
  }
  const int agree = posts_agree(q->posts, q->nranks);
  pthread_mutex_unlock(&g_mu);
  if (agree) compute(me, q->posts, q->nranks, c->rank);
  pthread_mutex_lock(&g_mu);
  if (barrier(q, 1) != 0) set_err(c, ncclRemoteError);
  if (!agree) {
    set_err(c, ncclInvalidUsage); /* every rank sees the mismatch */
    abort_clique(q);
  }
  pthread_mutex_unlock(&g_mu);
}

/* Enqueues o on the stream: runs it now (eager) or records a host node whose
 * operation the communicator keeps (capture). */
static ncclResult_t enqueue(op *o, CUstream stream) {
  struct ncclComm *c = o->comm;
  const cgrt__driver *d = cgrt__driver_emulated();
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  if (stream != NULL && d->cuStreamIsCapturing(stream, &cs) != CUDA_SUCCESS) return ncclUnhandledCudaError;
  if (cs == CU_STREAM_CAPTURE_STATUS_NONE) {
    op tmp = *o; /* eager: runs inside the launch */
    return d->cuLaunchHostFunc(stream, run_op, &tmp) == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
  }
  op *keep = malloc(sizeof *keep);
  if (!keep) return ncclSystemError;
  *keep = *o;
  if (o->np2p) {
    keep->p2ps = malloc(o->np2p * sizeof *keep->p2ps);
    if (!keep->p2ps) {
      free(keep);
      return ncclSystemError;
    }
    memcpy(keep->p2ps, o->p2ps, o->np2p * sizeof *keep->p2ps);
  }
  if (d->cuLaunchHostFunc(stream, run_op, keep) != CUDA_SUCCESS) {
    free(keep->p2ps);
    free(keep);
    return ncclUnhandledCudaError;
  }
  pthread_mutex_lock(&g_mu);
  keep->next = c->ops;
  c->ops = keep;
  pthread_mutex_unlock(&g_mu);
  return ncclSuccess;
}

/* ---- groups of sends and receives (per thread) ---- */
static _Thread_local int t_depth;
static _Thread_local struct {
  struct ncclComm *comm;
  CUstream stream;
  p2p *items;
  size_t n, cap;
  int bad; /* an error inside the group: reported by ncclGroupEnd */
} t_group;

static ncclResult_t e_ncclGroupStart(void) {
  t_depth++;
  return ncclSuccess;
}

static ncclResult_t e_ncclGroupEnd(void) {
  if (t_depth == 0) return ncclInvalidUsage;
  if (--t_depth > 0) return ncclSuccess;
  ncclResult_t r = t_group.bad ? t_group.bad : ncclSuccess;
  if (r == ncclSuccess && t_group.n > 0) {
    op o = {.kind = OP_P2P, .comm = t_group.comm, .p2ps = t_group.items, .np2p = t_group.n};
    r = enqueue(&o, t_group.stream);
  }
  free(t_group.items);
  memset(&t_group, 0, sizeof t_group);
  return r;
}

static ncclResult_t p2p_add(int send, void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                            CUstream stream) {
  const size_t es = dtype_size(t);
  if (!comm || es == 0 || peer < 0 || peer >= comm->nranks || (count && !buf)) return ncclInvalidArgument;
  if (t_depth == 0) {
    p2p one = {send, peer, buf, count * es};
    op o = {.kind = OP_P2P, .comm = comm, .p2ps = &one, .np2p = 1};
    return enqueue(&o, stream);
  }
  if (t_group.n > 0 && (t_group.comm != comm || t_group.stream != stream)) {
    t_group.bad = ncclInvalidUsage; /* the emulation groups one communicator and stream */
    return ncclSuccess;
  }
  if (t_group.n == t_group.cap) {
    size_t cap = t_group.cap ? 2 * t_group.cap : 8;
    p2p *items = realloc(t_group.items, cap * sizeof *items);
    if (!items) {
      t_group.bad = ncclSystemError;
      return ncclSuccess;
    }
    t_group.items = items;
    t_group.cap = cap;
  }
  t_group.comm = comm;
  t_group.stream = stream;
  t_group.items[t_group.n++] = (p2p){send, peer, buf, count * es};
  return ncclSuccess;
}

static ncclResult_t e_ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                               CUstream stream) {
  return p2p_add(1, (void *)buf, count, t, peer, comm, stream);
}

static ncclResult_t e_ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm,
                               CUstream stream) {
  return p2p_add(0, buf, count, t, peer, comm, stream);
}

/* ---- collectives ---- */
static ncclResult_t collective(int kind, const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t redop, ncclComm_t comm, CUstream stream) {
  if (!comm || dtype_size(t) == 0 || (unsigned)redop > (unsigned)ncclAvg || (count && (!send || !recv)))
    return ncclInvalidArgument;
  if (kind != OP_ALLGATHER && (t == ncclFloat16 || t == ncclInt64 || t == ncclUint64))
    return ncclInvalidArgument; /* not emulated */
  if (t_depth > 0) return ncclInvalidUsage; /* not emulated inside groups */
  op o = {.kind = kind, .comm = comm, .send = send, .recv = recv, .count = count, .dtype = t, .redop = redop};
  return enqueue(&o, stream);
}

static ncclResult_t e_ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t, ncclComm_t comm,
                                    CUstream stream) {
  return collective(OP_ALLGATHER, send, recv, count, t, ncclSum, comm, stream);
}

static ncclResult_t e_ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                                        ncclRedOp_t redop, ncclComm_t comm, CUstream stream) {
  return collective(OP_REDUCE_SCATTER, send, recv, count, t, redop, comm, stream);
}

static ncclResult_t e_ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t redop,
                                    ncclComm_t comm, CUstream stream) {
  return collective(OP_ALLREDUCE, send, recv, count, t, redop, comm, stream);
}

static const cgrt__nccl g_table = {
    .name = "emulated",
    .is_emulated = 1,
    .version = EMU_NCCL_VERSION,
    .path = "",
#define EMU_NCCL_ENTRY(sym, req, counted, ret, params, args) .sym = e_##sym,
    CGRT_NCCL_API(EMU_NCCL_ENTRY)
#undef EMU_NCCL_ENTRY
};

const cgrt__nccl *cgrt__nccl_emulated(void) { return &g_table; }
