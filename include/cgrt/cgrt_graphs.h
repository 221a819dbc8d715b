/* cgrt: decode steps as CUDA graphs — capture, dispatch, pointer-updated replay.
 *
 * A graph set captures one decode step of a host engine into one CUDA graph per
 * "bucket" (a padded batch size), for three modes:
 *   - CGRT_GRAPH_DECODE: uniform single-token decode, rows = requests;
 *   - CGRT_GRAPH_BLOCK:  non-causal multi-token blocks of length k, rows = requests * k;
 *   - CGRT_GRAPH_VERIFY: causal verify blocks of length k (speculative decoding's target
 *     step: row j of a request's block attends to its context up to its own token, as
 *     cgrt_mla_options.causal = 1 computes), rows = requests * k.
 * The host supplies an enqueue callback that launches one step for a batch descriptor on
 * a given stream; cgrt runs it eagerly to warm up, then under stream capture (thread-local
 * mode, largest bucket first), instantiates and uploads every graph.
 *
 * Each step (cgrt_graphs_step) picks the smallest bucket >= rows, makes the padding rows
 * inert (when the set knows the metadata buffers, see cgrt_graph_meta), applies the
 * host's new buffer addresses, and launches the graph:
 *   - pointer-updated replay (default): at instantiate cgrt indexes every kernel-node
 *     parameter (layout from cuFuncGetParamInfo) and every memcpy/memset node pointing
 *     into a registered buffer; a step patches only the nodes whose buffers moved. A
 *     pointer site is any 8-byte word of the parameters whose value lies inside a
 *     registered buffer: a whole 8-byte parameter, or each word of a larger parameter at
 *     an 8-byte-aligned offset of the packed parameters (a struct holding pointers, such
 *     as PyTorch's TensorIterator arrays, TensorInfo or OffsetCalculator, is 8-byte
 *     aligned), found in time linear in the parameter bytes. Works for the host's own
 *     kernels too. Words are compared as 64-bit device addresses in the GPU's unified
 *     address space, whatever the kernel makes of them: a word equal to an address inside
 *     a registered buffer is rewritten when that buffer moves. So the host must not pass
 *     a captured kernel, in such a word, a value that equals an address inside a
 *     registered buffer without being a pointer that should follow it: an 8-byte integer,
 *     hash or seed, an address kept as a key, or two packed 4-byte integers whose upper
 *     one equals the upper half of such an address (device addresses lie above 4 GiB,
 *     typically near 2^47: an upper half in the tens of thousands). Values below 2^32
 *     (an integer below 2^32, two packed 4-byte integers whose upper one is 0) and two
 *     packed normal floats (2^55 and above) never match. By default the host patches each
 *     moved node (one driver call each); with options.device_patch a cgrt kernel at the
 *     head of the graph rewrites them on the device from a mailbox the host fills in
 *     pinned memory (no driver call);
 *   - copy-in replay: the graph keeps its static buffers; inputs are copied in before and
 *     outputs copied out after the launch;
 *   - whole-graph update: the bucket is re-captured with the new addresses and applied
 *     with cuGraphExecUpdate, re-instantiated when the topology changed.
 * Checked replay (off by default, options.checked_replay) verifies before anything is
 * patched or launched that every pointer of every node lies inside a live allocation
 * known to cgrt and is still the allocation it was, and after launch that the counters
 * of multi-CTA kernels are back at zero (see options.checked_replay).
 *
 * Draft loops (cgrt_graphs_draft) run K decode steps with the metadata advanced on the
 * device in between: unrolled (K copies of the step in one graph), or, with
 * options.draft_while on a driver that supports conditional nodes (CUDA 12.4+), as one
 * conditional WHILE node whose body is one step, which stops early once every request's
 * draft has ended.
 *
 * Under capture: the enqueue callback runs on the capturing thread. There,
 * cgrt_graphs_create, _capture, _recapture, _step and _draft (of this set or any other)
 * return CGRT_ERROR_CAPTURING with nothing done, and the capture goes on: a step of the
 * capturing set would wait for the set itself, and another set's work would run outside
 * the graph being recorded. */
#ifndef CGRT_GRAPHS_H
#define CGRT_GRAPHS_H

#include <stdint.h>

#include "cgrt/cgrt_runtime.h"
#include "cgrt/cgrt_status.h"
#include "cgrt/cgrt_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cgrt_graphs cgrt_graphs;

typedef enum cgrt_graph_mode {
  CGRT_GRAPH_DECODE = 0, /* one row per request */
  CGRT_GRAPH_BLOCK = 1,  /* block_len rows per request, no intra-block mask */
  CGRT_GRAPH_VERIFY = 2  /* verify_len rows per request, causal inside the block */
} cgrt_graph_mode;

#define CGRT_GRAPH_MODE_COUNT 3
#define CGRT_GRAPHS_MAX_BUFFERS 4096
#define CGRT_GRAPHS_MAX_ROWS 65536
/* Most steps of a draft loop (options.draft_steps): an unrolled loop holds that many
 * copies of the step in one graph. */
#define CGRT_GRAPHS_MAX_DRAFT_STEPS 64
/* Most host-declared ranges (cgrt_graphs_set_ranges). */
#define CGRT_GRAPHS_MAX_RANGES 4096

/* What the enqueue callback is asked to launch. */
typedef struct cgrt_batch_desc {
  cgrt_graph_mode mode;
  int block_len;    /* rows per request: 1 in decode mode, options.block_len in block
                       mode, options.verify_len in verify mode (the rows are causal) */
  int num_reqs;     /* real requests (for a captured graph: those of the capture) */
  int rows;         /* real rows = num_reqs * block_len */
  int padded_reqs;  /* requests the launched work covers (bucket / block_len) */
  int padded_rows;  /* rows the launched work covers: the bucket size, or rows when eager */
  int capturing;    /* 1 when the callback runs under stream capture: it must not
                       synchronize, allocate or read results back */
  int draft_step;   /* index of the step inside a draft loop; 0 otherwise (and in a
                       WHILE body, see while_body) */
  /* Current address of every registered buffer, indexed by buffer id (registration
   * order). The callback must take its pointers from here. Valid during the call. */
  const CUdeviceptr *buffers;
  size_t num_buffers;
  /* 1 when the callback is captured into the body of a WHILE draft loop
   * (options.draft_while): what it launches runs once per draft step, so it must not
   * depend on draft_step (which is 0). Bodies may hold kernel, memcpy and memset nodes
   * (device memory only), empty, child-graph and conditional nodes: no host functions,
   * events or allocations. A callback that cannot comply returns an error: the set then
   * keeps the unrolled loop for that bucket. */
  int while_body;
  /* 1 when the callback runs as a warm-up before a bucket's capture (options.warmup_runs:
   * eager, on the capture stream, its results discarded), 0 otherwise (captures, and
   * eager steps past the largest bucket, which must compute the step). A warm-up exists
   * to run, once outside capture, the code the capture will run (lazy initialization,
   * kernel selection): a step that captures some layers once and has cgrt copy them
   * for the others (include/cgrt/cgrt_segment.h) may warm up those layers only. */
  int warmup;
} cgrt_batch_desc;

/* Launches one decode step for `batch` on `stream` (and only there, or on streams joined
 * to it by events). Returns CGRT_SUCCESS or any error; an error during capture ends the
 * capture cleanly with CGRT_ERROR_CAPTURE_FAILED. Called with the set's lock held: it
 * must not call back into this graph set. */
typedef cgrt_status (*cgrt_enqueue_fn)(void *user, CUstream stream, const cgrt_batch_desc *batch);

typedef enum cgrt_buffer_dir {
  CGRT_BUFFER_IN = 1,   /* read by the step (copy-in replay copies it in) */
  CGRT_BUFFER_OUT = 2,  /* written by the step (copy-in replay copies it out) */
  CGRT_BUFFER_INOUT = 3
} cgrt_buffer_dir;

/* A bindable buffer: registered before capture; its id is its index in the array.
 * [ptr, ptr + bytes) needs a non-zero ptr and bytes and must end at or below 2^64 (does
 * not wrap); registered buffers must not overlap. Else cgrt_graphs_create fails with
 * CGRT_ERROR_INVALID_ARGUMENT naming the buffer. */
typedef struct cgrt_buffer_desc {
  const char *name;  /* copied; used in messages */
  CUdeviceptr ptr;   /* address at capture time (the static buffer in copy-in replay) */
  size_t bytes;      /* size; a parameter pointing anywhere in [ptr, ptr+bytes) follows it */
  cgrt_buffer_dir dir;
} cgrt_buffer_desc;

/* Metadata buffers cgrt maintains inside the graph (ids of registered buffers, -1 for
 * none). When `enabled`, each graph starts with a cgrt kernel that expands per-request
 * metadata to per-row metadata and writes inert padding rows (seq_len 0, position 0,
 * slot -1), and draft loops advance them on the device. The host writes, per request r:
 *   req_seq_lens[r]  (int32, context length including this step's tokens),
 *   req_positions[r] (int64, position of the request's first new token),
 *   block_table[r * max_blocks_per_seq + i] (int32, KV-cache block ids);
 * the kernels of the step read, per row i (row = r * block_len + j):
 *   seq_lens[i] = req_seq_lens[r], positions[i] = req_positions[r] + j,
 *   (in verify mode too: the causal length of row j is positions[i] + 1, and
 *   cgrt_mla with causal = 1 derives it from req_seq_lens[r]),
 *   slot_mapping[i] = block_table[r][pos / block_size] * block_size + pos % block_size
 *   (int32, int64, int64; padding rows: 0, 0, -1).
 * draft_remaining (optional, -1 for none; only read by WHILE draft loops, see
 * cgrt_graphs_draft): int32 per request, draft_remaining[r] = how many draft steps
 * request r still wants in this loop; the host writes it before the call, cgrt never
 * writes it. A request with 0 takes part in no step of its own. When meta.enabled,
 * draft_remaining must be -1 or a registered buffer of at least max_num_seqs * 4 bytes
 * (else CGRT_ERROR_INVALID_ARGUMENT naming it). */
typedef struct cgrt_graph_meta {
  int enabled;
  int req_seq_lens, req_positions, block_table;
  int seq_lens, positions, slot_mapping;
  int block_size;
  int max_blocks_per_seq;
  int draft_remaining; /* default -1 (cgrt_graphs_options_init) */
} cgrt_graph_meta;

typedef enum cgrt_replay_mode {
  CGRT_REPLAY_POINTER_UPDATE = 0,
  CGRT_REPLAY_COPY_IN = 1,
  CGRT_REPLAY_EXEC_UPDATE = 2
} cgrt_replay_mode;

/* A device range the host declares live (for checked replay). */
typedef struct cgrt_range {
  CUdeviceptr base;
  size_t bytes;
  const char *what; /* copied */
} cgrt_range;

/* Called between the single-step replays of a draft loop when it cannot run inside one
 * graph (dcp_world_size > 1): the host rebuilds the metadata of step `next_step` on
 * `stream`. */
typedef cgrt_status (*cgrt_draft_rebuild_fn)(void *user, CUstream stream, int next_step,
                                             const cgrt_batch_desc *batch);

typedef struct cgrt_graphs_options {
  size_t size;            /* sizeof(cgrt_graphs_options) */
  int max_num_seqs;       /* required, >= 1 */
  int max_model_len;      /* required, >= 1 (draft-loop clamp) */
  int num_heads;          /* informational (per-rank query heads) */
  int dcp_world_size;     /* default 1 */
  int enable_decode;      /* capture decode buckets; default 1 */
  int block_len;          /* k >= 2 captures block-mode buckets; 0 (default) none */
  /* Capture sizes in rows (any order, duplicates ignored); NULL: 1, 2, 4, multiples of
   * 8 up to 256, multiples of 16 up to max_capture_rows. In block mode each size is
   * rounded up to a multiple of block_len. Each size must lie in [1,
   * CGRT_GRAPHS_MAX_ROWS], and there may be 1 to 1024 of them (capture_sizes NULL with
   * num_capture_sizes 0 for the defaults); else cgrt_graphs_create fails with
   * CGRT_ERROR_INVALID_ARGUMENT naming the entry. */
  const int *capture_sizes;
  size_t num_capture_sizes;
  /* Largest bucket in rows for the default sizes, in [0, CGRT_GRAPHS_MAX_ROWS] (else
   * CGRT_ERROR_INVALID_ARGUMENT); 0: min(max_num_seqs * rows_per_req * 2, 512). Always
   * clamped to max_num_seqs * rows_per_req (no batch can need more). */
  int max_capture_rows;
  int warmup_runs;        /* eager runs before each capture; default 1, 0 allowed */
  cgrt_enqueue_fn enqueue;  /* required */
  void *user;
  const cgrt_buffer_desc *buffers; /* copied */
  size_t num_buffers;     /* <= CGRT_GRAPHS_MAX_BUFFERS */
  cgrt_graph_meta meta;
  cgrt_replay_mode replay_mode;    /* default CGRT_REPLAY_POINTER_UPDATE */
  /* 1: checked replay (a debugging mode; default 0). Before a step patches or launches
   * anything, every pointer of every node (8-byte kernel parameters, words of larger
   * kernel parameters that pointed into a registered buffer or a range below at
   * instantiate, and memcpy/memset operands) must lie inside a live allocation known to
   * cgrt (a word of a larger parameter that lay in nothing known is not checked: it may
   * be integers):
   *   - a registered buffer at its current address: when that address becomes current
   *     (cgrt_graphs_create, or a binding) the set asks the driver for the buffer id
   *     (CU_POINTER_ATTRIBUTE_BUFFER_ID) of the allocation holding all of its bytes, and
   *     each checked step asks again: an address the driver knew no allocation at
   *     (0xdead000, host memory it does not know), an allocation since freed, or freed and
   *     its address handed out again (another buffer id) is refused until the host binds
   *     live memory;
   *   - the runtime's buffer registry (cgrt_memory.h): workspaces, the counter buffer,
   *     cgrt_mem_alloc allocations and registered ranges, each with the identity it had
   *     when the graph was indexed (a workspace grown before the lock after capture, or
   *     memory freed and allocated again, is another identity); registered ranges are
   *     asked of the driver again;
   *   - a range declared with cgrt_graphs_set_ranges, with the buffer id it had when
   *     declared (asked again);
   *   - memory the set owns;
   *   - device memory cgrt does not manage (a library's own workspace), with the buffer
   *     id the driver gave its allocation at capture (asked again). An 8-byte parameter
   *     that lay in nothing cgrt knows and that the driver knew no allocation at when the
   *     graph was indexed (a host address a kernel receives but does not dereference,
   *     such as cuBLAS's host-mode scalars, or an integer) is no device pointer and is
   *     not checked.
   * A copy-in binding must lie inside a live allocation. Otherwise the step returns
   * CGRT_ERROR_STALE_POINTER naming the node, parameter (and word) or buffer, with
   * nothing patched or launched (the eager fallback is refused the same way). A driver
   * call of the check that fails (cuPointerGetAttribute answering neither CUDA_SUCCESS
   * nor CUDA_ERROR_INVALID_VALUE) is no verdict: the step returns CGRT_ERROR_DRIVER
   * naming it, nothing launched; a buffer whose binding could not be asked is asked
   * again by the next checked step. After the launch the step waits for the replay
   * stream and verifies the counter buffer (CGRT_ERROR_COUNTERS_DIRTY) and a WHILE
   * loop's step counter. Costs per checked step: one driver call per buffer the graph
   * points into, per registered or declared range it uses and per pointer into memory
   * cgrt does not manage, a binary search per other
   * pointer parameter or word, three driver calls per binding, and a stream
   * synchronization (measured: bench/results/README.md, "Replay latency"). The unchecked
   * step does none of this. */
  int checked_replay;
  int fail_past_largest;  /* 1: CGRT_ERROR_NO_BUCKET past the largest bucket; 0 (default):
                             run the step eagerly and count the fallback */
  CUstream stream;        /* replay stream; NULL: a stream of the set */
  /* K in [2, CGRT_GRAPHS_MAX_DRAFT_STEPS] captures K-step draft loops of the decode
   * buckets; 0 (default): none. Other values: CGRT_ERROR_INVALID_ARGUMENT. */
  int draft_steps;
  cgrt_draft_rebuild_fn draft_rebuild; /* for draft loops under DCP; may be NULL */
  /* 1: also capture each draft loop as a conditional WHILE node (CUDA 12.4+ driver) that
   * stops early when every request's draft has ended, and use it in cgrt_graphs_draft.
   * Needs draft_steps >= 2 and dcp_world_size 1 (else ignored). The unrolled loops are
   * still captured: they serve when the driver lacks conditional nodes
   * (cuGraphConditionalHandleCreate, cuGraphAddNode or cuStreamBeginCaptureToGraph
   * missing or CUDA_ERROR_NOT_SUPPORTED: logged once at CGRT_LOG_INFO, not an error) and
   * for buckets whose WHILE graph failed to capture. The set then owns 256 bytes of
   * device memory (the loop's step counter, zero between launches), allocated by
   * cgrt_graphs_create. Default 0. */
  int draft_while;
  /* 1: pointer-updated replay patches kernel nodes on the device (CUDA 12.4+ driver,
   * sm_90a build of cgrt). Each graph then starts with a cgrt patch kernel, and every
   * kernel node that points into a registered buffer (and every metadata node) is made
   * device-updatable before instantiation. Before each launch the host writes the
   * buffers that moved (and num_reqs) into the bucket's mailbox in pinned memory -- no
   * driver call, whatever the number of nodes that point into them -- and the patch
   * kernel reads it over the bus and rewrites those nodes' parameters on the device
   * before they run. Costs: more GPU time per launch (the patch node reads host memory,
   * and each device-updatable node launches slightly slower; measured in
   * bench/results/README.md, "Replay latency"); per bucket, 24 bytes per pointer site
   * in the patch node's kernel parameters (a size class of 1 KB to 32760 bytes; a larger
   * table takes device memory instead, cgrt_bucket_info.table_bytes) and a mailbox of
   * 32 to 256 slots of (nbuf + 1) x 12 bytes (about 64 KB) of pinned memory, allocated
   * at capture; and the driver's rules for device-updatable nodes (no
   * cuGraphExecUpdate: requires replay_mode CGRT_REPLAY_POINTER_UPDATE; at most 1021
   * buffers). Memcpy and memset nodes and WHILE draft graphs keep host patching. Where
   * the driver or the device lacks the feature the set patches on the host (logged once
   * at CGRT_LOG_INFO, not an error); cgrt_bucket_info.device_patch tells which buckets
   * use it. A step that finds every slot of its bucket still unread by the GPU (that
   * many launches queued) waits for the GPU to read one. Default 0. */
  int device_patch;
  /* k >= 2 captures verify-mode buckets (CGRT_GRAPH_VERIFY: causal blocks of k rows, the
   * target model's verify step of speculative decoding), sized and dispatched as block
   * mode's with k rows per request; 0 (default) none. 1, negative values or k x
   * max_num_seqs above CGRT_GRAPHS_MAX_ROWS: CGRT_ERROR_INVALID_ARGUMENT. Independent
   * of block_len: a set may capture both. */
  int verify_len;
  /* 1: the warmup_runs eager runs happen once per cgrt_graphs_capture /
   * cgrt_graphs_recapture call, before the first bucket it captures (the largest), not
   * before each bucket (again before the next bucket when a bucket's warm-up or capture
   * fails). For a step whose lazy initialisation (library handles, module loads,
   * allocator growth) one run at the largest size covers. Default 0 (before each). */
  int warmup_once;
  /* 0 (default): while the callback captures bucket i + 1 on the calling thread, a worker
   * thread of the set indexes, instantiates and uploads bucket i (on a stream of its
   * own, with the set's context current; it makes no callback and no call on the capture
   * stream); cgrt_graphs_capture returns after both are done, with the same results and
   * statuses as in turn. 1: each bucket is instantiated before the next is captured (no
   * thread). */
  int serial_capture;
  /* 1: device-launched replay. A step's graph is launched on the GPU by a launcher kernel
   * of the set, not by cuGraphLaunch on the host: cgrt_graphs_step (and
   * cgrt_graphs_draft of an unrolled loop) writes the bucket into a control block in
   * pinned memory and stores the step number (a few stores, no driver call while the
   * launcher runs), and the launcher, polling that word on the GPU between steps,
   * launches the graph fire-and-forget (CUDA device graph launch; every bucket is
   * instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH and ends with a cgrt
   * node that reports its completion). The host's cost of a step no longer depends on
   * the driver or on how long the GPU ran before (bench/device_launch); the GPU pays a
   * few microseconds between the host's store and the graph's first kernel.
   *   Ordering contract: a device-launched step is ordered with no stream. It runs after
   * the set's earlier steps and drafts, and after everything cgrt itself put on the
   * replay stream, but not after other work on that or any stream: the caller makes sure
   * the step's inputs are written before the call (for example by synchronizing the
   * stream that wrote them), and waits for the step with cgrt_graphs_synchronize before
   * it reads the outputs or queues work that does.
   *   The launcher runs on a stream of the set's own and exits when no step comes for
   * device_launch_idle_us; the next step starts it again (one cuGraphLaunch). While it
   * runs, a context-wide synchronization (cuCtxSynchronize, cudaDeviceSynchronize,
   * torch.cuda.synchronize()) waits until it exits: at most device_launch_idle_us after
   * the last step.
   *   What keeps the host launch: WHILE draft loops, eager fallbacks past the largest
   * bucket, buckets the driver refuses to instantiate for device launch (logged once at
   * CGRT_LOG_INFO; cgrt_bucket_info.device_launch says which), and the bare launches of
   * cgrt_graphs_bucket_exec; each first waits for the device-launched steps. Moved
   * buffers are patched on the device with device_patch; a step that needs a host patch
   * (memcpy / memset nodes, or without device_patch) waits for the GPU, patches and
   * re-uploads its graph, then triggers. At most 31 steps are queued ahead of the last
   * completed one; the 32nd waits.
   *   Needs replay_mode CGRT_REPLAY_POINTER_UPDATE and an sm_90a build with the device
   * runtime: cgrt_graphs_create returns CGRT_ERROR_NOT_SUPPORTED where the launcher
   * kernels or device graph launch are missing (the emulation runs the launcher as a C
   * reference that takes every triggered step and exits, so there the set restarts it at
   * every step). A launch that fails on the device makes every later step and
   * cgrt_graphs_synchronize of the set return CGRT_ERROR_DRIVER, naming the step.
   * Default 0. */
  int device_launch;
  /* device_launch: microseconds the launcher waits for a step before it exits; default
   * (0) 2000. */
  unsigned device_launch_idle_us;
} cgrt_graphs_options;

/* Fills the defaults (and the size). Thread-safe. */
void cgrt_graphs_options_init(cgrt_graphs_options *options);

/* Creates a graph set (no capture yet: see cgrt_graphs_capture). Copies the options,
 * buffer list and names; creates the capture stream.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (message
 * names the field: missing callback, bad sizes, metadata buffers too small for the
 * largest bucket, ...); CGRT_ERROR_OUT_OF_MEMORY; CGRT_ERROR_DRIVER. On failure *out is
 * NULL. Thread-safe. Must not be called during capture. */
cgrt_status cgrt_graphs_create(cgrt_runtime *rt, const cgrt_graphs_options *options,
                               cgrt_graphs **out);

/* Destroys the set (graphs, executables, streams it made). NULL is a no-op. Must not be
 * called while another thread uses the set, nor during capture. A capture of the set's
 * stream that a failed cuStreamEndCapture left open is ended here (call it on the thread
 * that captured: the capture is thread-local). Returns CGRT_SUCCESS, or
 * CGRT_ERROR_INVALID_HANDLE for a set that is not live; driver failures during teardown
 * are not returned (the set is gone either way) but logged at CGRT_LOG_WARN, each naming
 * the driver call and its CUresult. */
cgrt_status cgrt_graphs_destroy(cgrt_graphs *set);

/* Warms up and captures every bucket of every enabled mode (largest first), then the
 * draft loops; instantiates and uploads each graph, builds its parameter index, reports
 * progress through the log callback (CGRT_LOG_INFO) and marks the runtime as capturing
 * meanwhile (cgrt allocations then fail with CGRT_ERROR_CAPTURING). Buckets already
 * captured are kept. A bucket whose capture fails (callback error, invalidated capture,
 * driver error) is left out: its capture is ended, the partial graph destroyed, the
 * stream stays usable, and the other buckets are still captured and usable; the call
 * then returns CGRT_ERROR_CAPTURE_FAILED with the first failure's message.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_CAPTURE_FAILED,
 * CGRT_ERROR_OUT_OF_MEMORY, CGRT_ERROR_DRIVER (warm-up failed).
 * Not thread-safe with steps on the same set (takes the set's lock). Sets may be captured
 * on several threads at once; a context synchronization meanwhile (cgrt_runtime_synchronize
 * on any thread) waits for the captures to end instead of breaking them. */
cgrt_status cgrt_graphs_capture(cgrt_graphs *set);

/* Re-captures and re-instantiates the bucket of `mode` that holds `rows` (for hosts whose
 * step changed, and for benchmarks). Statuses: as cgrt_graphs_capture, plus
 * CGRT_ERROR_INVALID_ARGUMENT (unknown mode, rows < 1) and CGRT_ERROR_NO_BUCKET (rows
 * past every bucket of the mode). */
cgrt_status cgrt_graphs_recapture(cgrt_graphs *set, cgrt_graph_mode mode, int rows);

/* A new address for a registered buffer, for one step. bytes 0 means the registered size;
 * otherwise it must be at least that (pointer-update and exec-update replay) or at most
 * that (copy-in replay, which copies `bytes`). ptr must be non-zero and [ptr, ptr +
 * bytes) (bytes 0: the registered size) must end at or below 2^64; else the step fails
 * with CGRT_ERROR_INVALID_ARGUMENT naming the binding, and nothing is launched. */
typedef struct cgrt_binding {
  int buffer;      /* id: index in options.buffers */
  CUdeviceptr ptr;
  size_t bytes;
} cgrt_binding;

/* Runs one decode step of `num_reqs` requests in `mode` on the replay stream (does not
 * wait for it); with options.device_launch the step is launched from the device instead,
 * ordered with no stream (see there; wait with cgrt_graphs_synchronize). Bindings move
 * buffers: in pointer-update and exec-update replay the new
 * address stays current for later steps; in copy-in replay it applies to this step only.
 * Success path: no allocation, no formatting, one uncontended lock.
 * Statuses: CGRT_SUCCESS; CGRT_ERROR_INVALID_HANDLE; CGRT_ERROR_INVALID_ARGUMENT (mode
 * not enabled, or not captured: cgrt_graphs_capture not called yet, or no bucket of the
 * mode captured; num_reqs < 1 or > max_num_seqs; bad binding); CGRT_ERROR_NO_BUCKET (past
 * the largest bucket with fail_past_largest); CGRT_ERROR_STALE_POINTER and
 * CGRT_ERROR_COUNTERS_DIRTY (checked replay; nothing launched for the former);
 * CGRT_ERROR_CALLBACK_FAILED (eager fallback); CGRT_ERROR_CAPTURE_FAILED (exec-update
 * re-capture); CGRT_ERROR_DRIVER (a failed node update leaves the bucket to be fully
 * re-patched by the next step; nothing was launched; with device_launch also: starting the
 * launcher failed, and the step was taken back, or an earlier device-launched step failed
 * on the device, which the message names). Thread-safe (serialized per set).
 * Makes the runtime's context current on the calling thread, as every cgrt call does.
 * Must not be called while the calling thread captures a stream. */
cgrt_status cgrt_graphs_step(cgrt_graphs *set, cgrt_graph_mode mode, int num_reqs,
                             const cgrt_binding *bindings, size_t num_bindings);

/* Runs a K-step draft loop (options.draft_steps) of decode steps for `num_reqs` requests:
 * one graph holding K steps with the metadata advanced on the device in between
 * (seq_lens = min(s + 1, max_model_len), positions + 1, slots from the block table).
 * With dcp_world_size > 1 it replays the decode graph K times and calls draft_rebuild in
 * between (logged once).
 *
 * WHILE loop (options.draft_while, when captured for the bucket): one graph launch that
 * runs n <= K steps, n decided on the device. Request r < num_reqs is active for step i
 * when its seq_len before step i is > 0 for i = 0 (req_seq_lens), in (0, max_model_len)
 * for i >= 1 (a request whose step reached max_model_len has ended), and, when
 * meta.draft_remaining is set, draft_remaining[r] > i. Step i runs when i < K and some
 * request is active for it; the loop stops at the first step with none (so n = 0 when no
 * request is active at all: nothing is launched but the metadata kernels). The steps
 * themselves are the unrolled loop's: after a WHILE loop of n steps every buffer holds
 * exactly what the first n steps of the unrolled loop leave (rows whose own draft ended
 * are still computed while another row is active; their results past their end are not
 * meaningful). The host learns n from the metadata: for a row with seq_lens > 0,
 * n = positions[r] - req_positions[r] + 1 (when n >= 1). cgrt does not read n back.
 * Pointer-updated replay patches nodes inside the WHILE body like any other; if the
 * driver refuses that (CUDA_ERROR_NOT_SUPPORTED / CUDA_ERROR_INVALID_VALUE from a body
 * node update; logged once at CGRT_LOG_WARN), the bucket's WHILE graph is re-captured and
 * re-instantiated whenever one of its buffers moved (stats.reinstantiations). In
 * exec-update replay a moved buffer always re-instantiates the WHILE graph.
 *
 * Statuses: as cgrt_graphs_step, plus CGRT_ERROR_NOT_SUPPORTED (no draft loops captured,
 * or DCP without draft_rebuild). Thread-safe (serialized). */
cgrt_status cgrt_graphs_draft(cgrt_graphs *set, int num_reqs, const cgrt_binding *bindings,
                              size_t num_bindings);

/* Replaces the host-declared live ranges (checked replay also accepts pointers into
 * them). Copies the list of count <= CGRT_GRAPHS_MAX_RANGES ranges (a larger count is
 * refused before any entry is read), and the buffer id (CU_POINTER_ATTRIBUTE_BUFFER_ID) of
 * each range's allocation. Each range needs a non-zero base and size, must end at or below
 * 2^64 (base + bytes does not wrap) and must lie inside one live allocation the driver
 * knows (else CGRT_ERROR_INVALID_ARGUMENT naming the range's index; the old list stays);
 * checked replay refuses a pointer into a range whose allocation has another id since.
 * Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_INVALID_ARGUMENT (also
 * ranges NULL with count > 0, count above CGRT_GRAPHS_MAX_RANGES), CGRT_ERROR_OUT_OF_MEMORY,
 * CGRT_ERROR_DRIVER. Thread-safe. */
cgrt_status cgrt_graphs_set_ranges(cgrt_graphs *set, const cgrt_range *ranges, size_t count);

/* The replay stream (options.stream or the set's own). */
CUstream cgrt_graphs_stream(cgrt_graphs *set);

typedef struct cgrt_graphs_stats {
  size_t size;                 /* set by the caller */
  uint64_t steps;              /* cgrt_graphs_step calls that succeeded */
  uint64_t replays;            /* graph launches (a draft loop counts one per launch) */
  uint64_t eager_fallbacks;    /* steps past the largest bucket run eagerly */
  uint64_t rebinds;            /* steps that moved at least one buffer */
  uint64_t nodes_patched;      /* kernel/memcpy/memset node updates issued by the host */
  uint64_t copies;             /* copy-in/copy-out transfers */
  uint64_t exec_updates;       /* successful cuGraphExecUpdate calls */
  uint64_t reinstantiations;   /* updates that fell back to re-instantiation */
  uint64_t draft_loops;
  size_t buckets;              /* captured graphs (draft loops included) */
  size_t nodes;                /* nodes over all captured graphs */
  double capture_seconds;      /* capture + instantiate + upload, all buckets */
  size_t graph_memory_bytes;   /* sum of cgrt_bucket_info.memory_bytes over captured buckets */
  uint64_t draft_while_loops;  /* draft loops run as a WHILE graph (also in draft_loops) */
  int draft_while_available;   /* 1 when at least one WHILE draft graph is captured */
  uint64_t device_patches;     /* device_patch: launches that delivered moved buffers via the mailbox */
  uint64_t device_nodes_patched; /* device_patch: kernel nodes rewritten on the device */
  uint64_t device_launches;    /* device_launch: steps and drafts launched from the device */
  uint64_t launcher_starts;    /* device_launch: host launches of the launcher (first step,
                                  and after each idle exit) */
  /* device_launch: GPU nanoseconds of the last completed device-launched step, from the
   * launcher's device-side launch of its graph to the start of its last node
   * (%globaltimer, read when the stats are; 0 before the first step, or while a later
   * step is in flight). */
  uint64_t last_device_step_ns;
} cgrt_graphs_stats;

/* Waits on the host until everything the set launched has completed: with
 * device_launch, every triggered step (polling the completion word in pinned memory, no
 * driver call while steps run), then the replay stream. Statuses: CGRT_SUCCESS,
 * CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_CAPTURING, CGRT_ERROR_DRIVER (a stream
 * synchronization failed, or a device launch failed: the message names the step). Not
 * thread-safe with the set's other calls. */
cgrt_status cgrt_graphs_synchronize(cgrt_graphs *set);

/* Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_INVALID_ARGUMENT.
 * Thread-safe. May be called during capture by other threads. */
cgrt_status cgrt_graphs_get_stats(cgrt_graphs *set, cgrt_graphs_stats *stats);

typedef struct cgrt_bucket_info {
  size_t size;           /* set by the caller */
  cgrt_graph_mode mode;
  int draft;             /* 1 for a draft-loop graph */
  int rows;              /* bucket size in rows */
  int captured;          /* 0 when its capture failed (or conditional nodes are missing) */
  size_t nodes;          /* WHILE graphs: top-level nodes and body nodes */
  size_t patch_sites;    /* indexed (node, parameter) sites pointing into buffers */
  double capture_seconds, instantiate_seconds;
  /* Graph memory the driver attributes to this bucket: the bytes its graph memory nodes
   * (allocations captured from cuMemAllocAsync / cudaMallocAsync) hold once instantiated
   * and uploaded, read as the change of
   * cuDeviceGetGraphMemAttribute(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) across the bucket's
   * capture, instantiation and upload (a device-wide count: graphs with memory nodes
   * instantiated meanwhile by other threads would be counted too; 0 when the driver
   * cannot tell). 0 for a graph without memory nodes. Not included: the driver's own
   * storage for the executable (no driver API reports it) and cgrt's per-bucket
   * allocations (device_patch's mailbox, and its site table when that is not in the
   * patch node's parameters). */
  size_t memory_bytes;
  uint64_t replays;
  int draft_while;       /* 1 for a draft loop as a conditional WHILE node */
  int device_patch;      /* 1 when its kernel nodes are patched on the device */
  /* Memory cgrt itself allocates for this bucket, exactly as allocated: device memory
   * (table_bytes: the device patch site table and group starts, only when the table is
   * too large for the patch node's kernel parameters, else 0) and pinned host memory
   * (pinned_bytes: the device patch mailbox, which also carries the launch count). 0
   * without device patching. */
  size_t table_bytes;
  size_t pinned_bytes;
  /* Device patching with the site table in the patch node's kernel parameters: the size
   * of those parameters (a size class, 1 KB to 32760 bytes), held by the driver with the
   * executable like every node's parameters (not graph memory, not allocated by cgrt);
   * 0 otherwise. */
  size_t patch_param_bytes;
  /* Nodes of this bucket that a move of a buffer they point into patches through a
   * driver call on the host (cuGraphExec*NodeSetParams): every node with a pointer site
   * under host patching; under device patching the memcpy and memset nodes with a site,
   * WHILE body nodes, and kernel nodes the driver did not make device-updatable. */
  size_t host_patch_nodes;
  int device_launch;     /* 1 when its steps are launched from the device (device_launch) */
} cgrt_bucket_info;

/* Number of buckets (draft loops included) and their descriptions, largest first per
 * mode. Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE, CGRT_ERROR_INVALID_ARGUMENT
 * (index out of range). Thread-safe. */
size_t cgrt_graphs_bucket_count(cgrt_graphs *set);
cgrt_status cgrt_graphs_get_bucket(cgrt_graphs *set, size_t index, cgrt_bucket_info *info);

/* The bucket size (rows) a step of num_reqs requests in `mode` would use; 0 if it would
 * run eagerly or fail. Thread-safe. */
int cgrt_graphs_bucket_rows(cgrt_graphs *set, cgrt_graph_mode mode, int num_reqs);

/* For measurement: the executable graph of bucket `index` (as in cgrt_graphs_get_bucket)
 * in *exec, ready for exactly `launches` direct launches (cuGraphLaunch on
 * cgrt_graphs_stream(set)): a bare launch of it is the floor of a step of that bucket. The
 * set keeps owning it (never destroy or update it). A direct launch runs with the
 * addresses and num_reqs of the bucket's last step (before the first: as captured, every
 * row inert). Under device_patch its patch node reads one mailbox slot per launch: this
 * call fills the next `launches` slots with "nothing moved" (waiting, as a step does,
 * for slots the GPU has not read yet) and counts them as launched, so the caller must
 * launch it exactly `launches` times before the set's next step or draft of this bucket;
 * fewer or more leaves the mailbox out of step with the device and later steps patch
 * wrong. launches: 0 to 32. Statuses: CGRT_SUCCESS, CGRT_ERROR_INVALID_HANDLE,
 * CGRT_ERROR_INVALID_ARGUMENT (exec NULL, index out of range, launches over 32, or the
 * bucket is not captured), CGRT_ERROR_DRIVER (waiting for a slot). Thread-safe. */
cgrt_status cgrt_graphs_bucket_exec(cgrt_graphs *set, size_t index, unsigned launches, CUgraphExec *exec);

#ifdef __cplusplus
}
#endif
#endif
