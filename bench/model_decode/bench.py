"""Decode steps of the DeepSeek-V2-Lite-shaped model (examples/deepseek_v2_lite): the step
served by cgrt graphs (PreparedStep) against the same step under torch.cuda.CUDAGraph
with static buffers and copy-in (cgrt's MLA decode inside), against the same model under
torch.cuda.CUDAGraph with a peer library's attention (FlashMLA, else FlashInfer:
bench/peers/mla_peers.py), plus eager PyTorch; same weights, KV caches and inputs.

    bash bench/model_decode/h200_run.sh final LIBDIR     # H200: the whole results file, ~5 min
    python3 bench/model_decode/bench.py --out DIR        # the same script, by hand
    CGRT_DRIVER=emulated python3 bench/model_decode/bench.py --smoke --out /tmp/x  # code path check

Writes DIR/model_decode.json and PNG plots (step latency against batch, one plot per
context, the three methods; host time p50, p99 and quietest round per batch). The step
is the lean one of model.py: per layer RMSNorm, the q / kv_a GEMM, the absorbed W_UK bmm
writing into MLA's q, one fused kernel for the latent RMSNorm + RoPE + KV-cache write +
q_pe, MLA, the W_UV bmm, o_proj and down GEMMs with the residual add inside (addmm_),
RMSNorm, gate/up GEMM, SiLU x up (fused.py: Triton on the GPU; config.fusions says which
path ran). cgrt's MLA plans use programmatic dependent launch (--pdl 2, the default:
the split kernel reads seq_lens, schedules the step and reads its first block-table
entries while the RoPE + KV-write kernel before it runs; config.mla_programmatic_launch);
with --vproj 1 (the
default; config.vproj) the buckets below the MLA plan's counters_min_rows run a plan with
v_head_dim, whose value projection replaces the W_UV bmm (docs/mla_decode.md, "The value
projection"); the torch_graph_peer step keeps the bmm after the peer's attention.

Methods, per (batch, context) point, with a bucket of B >= batch rows:
  cgrt_prepared    the engine's per-step call: gs.prepare(bind) once per entry of a ring
                   of 4 input sets (token ids, request lengths and positions: new device
                   tensors), then ps(n) per step: cgrt rebinds (pointer update on the
                   device, no copy), its metadata kernel derives per-row lengths,
                   positions and slots, and the graph launches.
  cgrt_nobind      cgrt_graphs_step without bindings (untyped call): cgrt's path alone.
  launch_floor     a bare cuGraphLaunch of the same bucket's executable on the replay
                   stream (floor.py): the driver's own host cost for this graph.
  torch_graph      what Python engines do: one torch.cuda.CUDAGraph per bucket over static
                   input tensors; each step copies the prepared row-level inputs (token
                   ids, positions, lengths, slot mapping) into them, then replays.
  torch_graph_peer the same, with attention by the peer (its per-step plan captured in
                   the graph; "attention" names it); the best plain PyTorch engine here.
  cgrt_prepared_blocking / cgrt_prepared_sleep_poll  (at BLOCKING_POINTS only) the
                   prepared step with the host waiting by a blocking event sync, or by
                   sleeping through 80% of the previous step before polling.
  cgrt_prepared_fixed  (at BLOCKING_POINTS only) the first PreparedStep of the ring every
                   step: the same Python and C call with nothing moved after its first
                   step, which splits prepared - nobind into the moves' cost and the
                   call's (host_time.breakdown_us).
  cgrt_device_launch  the same PreparedStep ring on a second decode set created with
                   device_launch=1 (and device_patch): ps(n) triggers the step through
                   pinned memory and cgrt's launcher kernel launches the graph on the GPU
                   (no driver call on the host while the launcher runs); the host waits
                   with GraphSet.synchronize() (polling the step's completion word).
                   The step is ordered with no stream, so its latency_ms is not
                   event-timed: it is the GPU time the set reports (%globaltimer from
                   the launcher's device-side launch to the step's last node, stats
                   last_device_step_ns); sync_step_ms is what the host sees.
                   --no-device-launch leaves it out.
  eager            the same PyTorch code and cgrt MLA launched op by op (a few steps).
Per step, synchronized: the host waits for the step's end by polling an event (an engine
that reads its tokens back); latency_ms = CUDA events before and after the host part on
the replay stream (the GPU time of the replay, copies included for torch); host_us =
perf_counter around the host part; sync_step_ms = perf_counter from before the host part
to when the host sees the step's end (what an engine waiting for tokens sees). Headline
figures are p50 and p99 over ALL timed steps of a method (--iters, in --rounds rounds
interleaved with the other methods so drifts and bursts of host noise hit all alike);
each round's host p50 and the quietest one (best_round_p50) are secondary fields.
With --profile-kernels (the final run), each point also records kernel_profile, taken after
everything timed, the speculative-decoding part included (a profiled process keeps CUPTI
attached, and every later launch costs more on the host; the GPU figures are those of the
timed steps): per method
the GPU kernels of a step (torch.profiler), their summed time, the span from the first
kernel's start to the last one's end (span - sum: the gaps between kernels) and the
kernels by name. Per
point, host_probe records the host right after the rounds (a near-empty ctypes call's
p50/p99, load average, core, clock, context switches) and round_host the host during each
round (cores at its start and end, the hypervisor's steal share, involuntary switches, a
ctypes call's p50 after it), beside each method's per-round host p50 (host_us.round_p50);
--pin-cpu N runs the process on one core; ratios gives cgrt over each torch
method (GPU p50 and synchronous step p50). Python's garbage collector is off while steps
are timed, for every method alike.

nodes_per_step: cgrt's graphs per bucket (every node, cgrt's metadata and device-patch
kernels included) and the torch methods' step captured into a kept graph (nodes by type,
cuGraphGetNodes) for the measured batches.

Capture: the whole bucket set (vLLM's sizes 1, 2, 4, 8, 16, 24, ... up to max_num_seqs),
after one untimed eager step at every bucket size (the step's lazy initialisation per shape
is paid by nobody), at equal policies: one eager warm-up before each bucket on both sides
(cgrt warmup_once=0; torch: eager run, synchronize, torch.cuda.graph(pool=shared), as vLLM
does, gc.collect and empty_cache off), and one warm-up for the set on both sides (cgrt's
default: before the largest bucket; torch: before the first capture only). Each of the
four is sampled CAPTURE_REPS times in alternating order (cgrt first, then torch first) in
pools of their own; capture.equal_policies gives the medians' ratios, samples_seconds
every sample. cgrt's wall clock covers warm-ups, captures, index, instantiation (on its
worker thread, overlapped with the next capture) and upload; torch's covers warm-ups,
captures and instantiation. Graph memory per bucket: cgrt's private pool growth, memory
nodes and patch tables; torch's pool.

KV cache sizing: 128 requests x 32K tokens x 576 x 2 bytes is 4.9 GB per layer, 132 GB
for 27 layers: too much with the weights. The benchmark allocates as many distinct
per-layer caches as fit (config.kv_distinct_caches); layer l uses cache l mod that number
(the same bytes read per step as distinct caches).

Speculative decoding (spec): the MTP-style drafter proposes k = 1..4 tokens per request
(k >= 2: one cgrt_graphs_draft launch; k = 1: one graph step), the target verifies k + 1
single-token rows per request, and the acceptance and the advance of lengths, positions
and KV slots (rollback of rejected drafts) happen on the device: no host sync inside the
loop. Per (k, batch 1/8/32) at --spec-context: a forced run (per-draft acceptance alpha,
seeded draws on the device: what a trained drafter that agrees that often would give)
and a real run (greedy acceptance: drafts compared with the target's tokens on the
device; the random model's drafter predicts the target's bigram part, W_proj = [I; 0],
and agrees about 0.3 of the time: examples/deepseek_v2_lite/config.py), --spec-iters
iterations back to back; tokens/s = emitted / GPU time against plain decode's tokens/s
(spec.plain_decode, the decode set's synchronous step), the draft loop's cost per
proposed token, and for the real run the emitted tokens against plain
greedy decoding from the same state (mismatches with the logit margin that decided each).
"""
import argparse
import contextlib
import datetime
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples", "deepseek_v2_lite"))

import torch  # noqa: E402

import backend as cg  # noqa: E402
import common  # noqa: E402
from common import say  # noqa: E402
from config import FULL, REDUCED, vllm_capture_sizes, with_layers  # noqa: E402
from engine import Engine, io_buffers, pages_for, summarize_ms  # noqa: E402
import fused  # noqa: E402
from model import Exec, PeerExec, weight_bytes  # noqa: E402

sys.path.insert(0, HERE)
from floor import Floors  # noqa: E402
from timing import gc_off  # noqa: E402

RING = 4


def gpu_meta(be):
    m = common.run_meta(be)
    m["cgrt_library"] = be.info.get("library")
    if os.environ.get("CGRT_BENCH_COMMAND"):  # the command that ran this script (h200_run.sh sets it)
        m["command"] = os.environ["CGRT_BENCH_COMMAND"] + " (runs: " + m["command"] + ")"
    if not be.emulated:
        m["gpu"] = torch.cuda.get_device_name(be.device)
        m["cuda_runtime"] = torch.version.cuda
        try:
            m["nvidia_driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                                capture_output=True, text=True, timeout=20).stdout.strip()
        except Exception:  # noqa: BLE001
            m["nvidia_driver"] = None
        m["driver"] = m["nvidia_driver"]  # the results index asks every file for gpu and driver
    return m


def pool_bytes(pool):
    """Bytes of the segments of one private pool (torch.cuda.memory_snapshot)."""
    try:
        segs = torch.cuda.memory_snapshot()
    except Exception:  # noqa: BLE001
        return None
    if segs and "segment_pool_id" not in segs[0]:
        return None
    return sum(seg["total_size"] for seg in segs if tuple(seg["segment_pool_id"]) == tuple(pool))


def free_bytes():
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


@contextlib.contextmanager
def no_gc_during_capture():
    """vLLM turns these off while it captures: they cost per bucket and free nothing."""
    saved = (gc.collect, torch.cuda.empty_cache)
    gc.collect = lambda *a, **k: 0
    torch.cuda.empty_cache = lambda: None
    try:
        yield
    finally:
        gc.collect, torch.cuda.empty_cache = saved


_CU = None
_NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "child_graph", 5: "empty", 6: "wait_event",
               7: "event_record", 8: "ext_semas_signal", 9: "ext_semas_wait", 10: "mem_alloc", 11: "mem_free",
               12: "batch_mem_op", 13: "conditional"}


def graph_node_counts(raw_graph):
    """Nodes of a cudaGraph_t by type (cuGraphGetNodes / cuGraphNodeGetType through
    libcuda): {"nodes": n, "kernel": k, ...}."""
    global _CU
    import ctypes
    if _CU is None:
        _CU = ctypes.CDLL("libcuda.so.1")
    g = ctypes.c_void_p(raw_graph)
    n = ctypes.c_size_t(0)
    if _CU.cuGraphGetNodes(g, None, ctypes.byref(n)):
        raise RuntimeError("cuGraphGetNodes failed")
    nodes = (ctypes.c_void_p * n.value)()
    if _CU.cuGraphGetNodes(g, nodes, ctypes.byref(n)):
        raise RuntimeError("cuGraphGetNodes failed")
    out = {"nodes": n.value}
    t = ctypes.c_int(0)
    for nd in nodes:
        _CU.cuGraphNodeGetType(ctypes.c_void_p(nd), ctypes.byref(t))
        name = _NODE_TYPES.get(t.value, str(t.value))
        out[name] = out.get(name, 0) + 1
    return out


class TorchGraphs:
    """torch.cuda.CUDAGraph per bucket over static inputs; copy-in each step. make_ex:
    the Exec of the step (default: plain calls with cgrt's MLA; PeerExec: a peer's
    attention), name: the method's name."""

    def __init__(self, eng, sizes, stream, make_ex=None, name="torch_graph"):
        self.eng, self.sizes, self.stream = eng, sorted(sizes, reverse=True), stream
        self.io = io_buffers(eng.cfg, eng.S, eng.MB, eng.be.device)
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs, self.buckets = {}, []
        self.make_ex = make_ex or (lambda: Exec(eng.be, eng.be.stream_handle(), kernels=False))
        self.name = name
        self.host_plan = None
        self.block_table = None
        self.attention = "cgrt"

    def set_host_plan(self, peer, heads):
        """For a peer whose plan is host work: plan on the static buffers before each replay
        (the block table the graphs were captured with)."""
        self.host_plan = lambda B: peer.plan(self.block_table[:B], self.io["seq_lens"][:B], heads, 1, False)

    def bucket(self, n):
        return min(s for s in self.sizes if s >= n)

    def forward(self, B, io):
        e = self.eng
        e.model.forward(self.make_ex(), io, B, e.plan)

    def count_nodes(self, B, block_table):
        """Nodes of bucket B's step captured once more into a kept, never instantiated
        graph (outside every timed part)."""
        io = dict(self.io)
        io["block_table"] = block_table
        g = torch.cuda.CUDAGraph(keep_graph=True)
        with torch.cuda.graph(g, pool=self.pool, stream=self.stream):
            self.forward(B, io)
        c = graph_node_counts(g.raw_cuda_graph())
        del g
        return c

    def capture(self, block_table, warmup="each"):
        """Captures every bucket and returns the seconds spent in warm-ups and captures
        (torch.cuda.graph instantiates at the end of its capture). warmup "each": one
        eager run before each bucket's capture (as vLLM and cgrt's default do), "first":
        one before the first (largest) only. The "each" pass keeps its graphs and measures
        their memory (outside the timed part); a "first" pass is timed and dropped."""
        io = dict(self.io)
        io["block_table"] = block_table
        self.block_table = block_table
        keep = warmup == "each"
        pool = self.pool if keep else torch.cuda.graph_pool_handle()
        timed = 0.0
        # A "first" pass drops its graphs, but only after the round: torch's allocator keeps
        # a shared pool alive while a graph captured into it exists (each capture_begin adds
        # a use, each graph's destruction gives one back), and a capture_begin into a pool
        # whose graphs are all gone fails (CUDACachingAllocator: use_count > 0 assert).
        dropped = []
        with no_gc_during_capture():
            for B in self.sizes:
                t0 = time.perf_counter()
                if keep or B == self.sizes[0]:
                    self.forward(B, io)
                    torch.cuda.synchronize()
                timed += time.perf_counter() - t0
                if keep:
                    f0, p0 = free_bytes(), pool_bytes(pool)
                t1 = time.perf_counter()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool, stream=self.stream):
                    self.forward(B, io)
                t2 = time.perf_counter()
                timed += t2 - t1
                if not keep:
                    dropped.append(g)
                    continue
                g.replay()
                f1, p1 = free_bytes(), pool_bytes(pool)
                self.graphs[B] = g
                self.buckets.append({"rows": B, "capture_instantiate_seconds": t2 - t1,
                                     "driver_delta_bytes": f0 - f1,
                                     "pool_growth_bytes": None if p0 is None else p1 - p0})
        del dropped
        return timed

    def step(self, inp, B):
        s = self.io
        s["token_ids"].copy_(inp["token_ids"], non_blocking=True)
        s["positions"].copy_(inp["positions"], non_blocking=True)
        s["seq_lens"].copy_(inp["seq_lens"], non_blocking=True)
        s["slot_mapping"].copy_(inp["slot_mapping"], non_blocking=True)
        if self.host_plan is not None:  # a peer whose plan is host work (FlashInfer): before each replay
            self.host_plan(B)
        self.graphs[B].replay()


def _cgrt_capture(eng, **kw):
    """One capture of the decode bucket set: (set, wall seconds)."""
    gs = eng.new_decode_set(**kw)
    gs.account_pool()
    t0 = time.perf_counter()
    gs.capture()
    return gs, time.perf_counter() - t0


def _breakdown(gs, wall):
    b = [x for x in gs.buckets() if x["captured"]]
    cap, back = sum(x["capture_seconds"] for x in b), sum(x["instantiate_seconds"] for x in b)
    pool = sum(g for _, g in gs.pool_log())
    tables = sum(x["table_bytes"] for x in b)
    mem = sum(x["memory_bytes"] for x in b)
    return {"seconds_wall": wall, "buckets": len(b), "capture_seconds_sum": cap,
            "device_patch_buckets": sum(x["device_patch"] for x in b),
            "graph_memory_bytes": {"pool_growth": pool, "memory_nodes": mem, "cgrt_tables": tables,
                                   "total": pool + mem + tables,
                                   "patch_node_param_bytes": sum(x["patch_param_bytes"] for x in b)},
            "index_instantiate_upload_seconds_sum": back,
            "rest_seconds": wall - cap - back,
            "note": "capture_seconds_sum: stream capture of the Python step, per bucket, summed; "
                    "index_instantiate_upload_seconds_sum: parameter index, device-patch marks, "
                    "instantiate, upload and its wait, summed (on cgrt's worker thread, overlapped "
                    "with the next capture, unless serial); rest: warm-up runs, patch tables, "
                    "Python and the part of the back half that does not overlap"}


CAPTURE_REPS = 3  # samples per capture policy and side, in alternating order


def _capture_samples(be, eng, stream, bt_static, reps, kept):
    """Wall seconds of the whole bucket set's capture under both warm-up policies on both
    sides, REPS samples each. Every lazy initialisation of the step is paid before (one
    untimed eager step at every bucket size: Triton specialisations, cuBLAS heuristics,
    allocator blocks), and the order alternates per repetition (cgrt first in even ones,
    torch first in odd ones), so neither side pays for coming first. Each sample captures
    into a pool of its own that is given back (and the cache emptied) after it, outside the
    timed part; `kept` holds the sets the rest of the benchmark uses (the first repetition's
    cgrt default set, as the engine's decode set, and the first torch per-bucket set)."""
    samples = {"cgrt_each": [], "torch_each": [], "cgrt_once": [], "torch_once": []}
    for r in range(reps):
        order = ("cgrt_each", "torch_each", "cgrt_once", "torch_once")
        if r % 2:
            order = ("torch_each", "cgrt_each", "torch_once", "cgrt_once")
        for name in order:
            keep = r == 0 and name in ("cgrt_once", "torch_each")
            if name == "cgrt_once" and keep:
                secs = eng.capture_decode(account_pool=True)
                kept["cgrt_default"] = secs
            elif name.startswith("cgrt"):
                gs, secs = _cgrt_capture(eng, torch_pool=None, warmup_once=int(name == "cgrt_once"))
                if r == 0:
                    kept["warmup_each" if name == "cgrt_each" else "once_sample"] = _breakdown(gs, secs)
                gs.close()
            else:
                tg = TorchGraphs(eng, eng.decode_sizes, stream)
                secs = tg.capture(bt_static, warmup="each" if name == "torch_each" else "first")
                if keep:
                    kept["torch"] = tg
                del tg
            samples[name].append(secs)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()  # every sample's pool back, outside every timed part
            say(f"capture sample {r}: {name} {secs:.3f} s")
    return samples


def _segments_preflight(be, eng):
    """One untimed capture of the bucket set with layer segments: where it fails (a node
    the driver refuses to copy, say), the benchmark captures every layer instead and
    records why, rather than losing the run."""
    if not eng.layer_segments:
        return {"ran": False}
    try:  # into a pool of its own (closing a set of the shared pool would release it)
        gs, _ = _cgrt_capture(eng, torch_pool=None)
        missing = [b["rows"] for b in gs.buckets() if not b["captured"]]
        gs.close()
        if missing:
            raise RuntimeError(f"buckets {missing} were not captured")
        be.synchronize()
        return {"ran": True, "ok": True}
    except Exception as e:  # noqa: BLE001 - recorded, and the run goes on without segments
        eng.layer_segments = False
        eng.layer_reports.clear()
        say(f"layer segments failed their preflight capture, captured without them: {e}")
        return {"ran": True, "ok": False, "error": str(e)[:2000]}


def capture_bench(be, eng, stream, bt_static, reps=CAPTURE_REPS):
    """Capture of the bucket set, cgrt against torch.cuda.graph at equal warm-up policies
    (_capture_samples), and graph memory per bucket."""
    names = ("token_ids", "req_seq_lens", "req_positions", "block_table")
    sizes = eng.decode_sizes if not be.emulated else eng.decode_sizes[:1]
    for B in sizes:  # untimed: the step's lazy initialisation at every bucket size
        eng.eager_decode({k: eng.dec[k] for k in names}, 1, B)
    be.synchronize()
    cap = {"sizes": eng.decode_sizes, "reps": reps,
           "order": "untimed eager step at every bucket size; then per repetition the four captures "
           "(cgrt warm-up per bucket, torch warm-up per bucket, cgrt one warm-up, torch one warm-up), "
           "cgrt first in even repetitions and torch first in odd ones; each sample in a pool of its own, "
           "given back after it"}
    variants, kept = {}, {}
    preflight = _segments_preflight(be, eng)
    gs_pool0 = pool_bytes(be.pool) if not be.emulated else None
    r0 = torch.cuda.memory_reserved() if not be.emulated else None
    f0 = free_bytes() if not be.emulated else None
    if be.emulated:
        kept["cgrt_default"] = eng.capture_decode(account_pool=True)
        samples = None
    else:
        samples = _capture_samples(be, eng, stream, bt_static, reps, kept)
        variants["warmup_each"] = kept["warmup_each"]
    secs = kept["cgrt_default"]
    f1 = free_bytes() if not be.emulated else None
    r1 = torch.cuda.memory_reserved() if not be.emulated else None
    gs = eng.decode_set
    st = gs.stats()
    variants["default"] = _breakdown(gs, secs)
    buckets = gs.buckets()
    growth = dict(gs.pool_log())  # rows -> pool growth during its capture
    per_bucket = []
    for b in buckets:
        if not b["captured"]:
            continue
        pg = growth.get(b["rows"])
        per_bucket.append({"rows": b["rows"], "pool_growth_bytes": pg, "memory_node_bytes": b["memory_bytes"],
                           "cgrt_table_bytes": b["table_bytes"], "cgrt_pinned_host_bytes": b["pinned_bytes"],
                           "patch_node_param_bytes": b["patch_param_bytes"],
                           "total_device_bytes": None if pg is None else pg + b["memory_bytes"] + b["table_bytes"],
                           "nodes": b["nodes"], "patch_sites": b["patch_sites"]})
    pool_total = None if gs_pool0 is None else pool_bytes(be.pool) - gs_pool0
    tables = sum(b["cgrt_table_bytes"] for b in per_bucket)
    memnodes = sum(b["memory_node_bytes"] for b in per_bucket)
    cgrt_total = None if pool_total is None else pool_total + memnodes + tables
    cap["cgrt"] = {
        "seconds_wall": secs, "seconds_reported": st["capture_seconds"], "breakdown": variants,
        "layer_segments": {"enabled": eng.layer_segments, "preflight": preflight,
                           "reports": [{"set": what, "rows": rows, **r.as_dict()}
                                       for (what, rows), r in sorted(eng.layer_reports.items())],
                           "note": "per bucket (the last capture of it): layers the host ran under capture, "
                                   "layers cgrt appended as copies (cgrt.repeat), nodes per copied layer, and "
                                   "why every layer was captured instead (fallback, null when it was not)"},
        "buckets": buckets, "nodes": st["nodes"], "memory_per_bucket": per_bucket,
        "pool_bytes": pool_total, "pool_growth_sum_bytes": sum(b["pool_growth_bytes"] or 0 for b in per_bucket),
        "memory_node_bytes": memnodes, "cgrt_table_bytes": tables,
        "cgrt_pinned_host_bytes": sum(b["cgrt_pinned_host_bytes"] for b in per_bucket),
        "patch_node_param_bytes": sum(b["patch_node_param_bytes"] for b in per_bucket),
        "graph_memory_total_bytes": cgrt_total,
        "driver_delta_bytes_total": None if f0 is None else f0 - f1,
        "driver_side_bytes": None if f0 is None else (f0 - f1) - (r1 - r0),
        "memory_note": "per bucket: the growth of the set's private torch pool while that bucket's step "
                       "ran under capture (torch.cuda.memory_reserved before and after, on the capturing "
                       "thread: only the pool can grow then), plus its graph memory nodes (driver count) "
                       "and cgrt's device patch table (bytes allocated: 0 when the table is in the patch "
                       "node's kernel parameters, patch_node_param_bytes, which the driver keeps with the "
                       "executable like every node's parameters, on both sides). pool_bytes: the pool's segments "
                       "(torch.cuda.memory_snapshot) after the capture, minus before. graph_memory_total: "
                       "pool + memory nodes + cgrt tables. driver_side_bytes: free device memory lost "
                       "across the capture sequence minus torch's reserved growth (the kept sets: executable "
                       "graphs' driver storage plus cgrt's tables; no API reports the executables' storage "
                       "exactly)"}
    fb = {r.fallback for r in eng.layer_reports.values() if r.fallback}
    say(f"layer segments: {sum(r.appended for r in eng.layer_reports.values())} layers appended over "
        f"{len(eng.layer_reports)} captures" + (f"; fallbacks: {sorted(fb)}" if fb else ""))
    say(f"cgrt captured {st['buckets']} buckets in {secs:.3f} s ({st['nodes']} nodes); graph memory "
        f"{(cgrt_total or 0) / 2**20:.2f} MiB (pool {(pool_total or 0) / 2**20:.2f} MiB + memory nodes "
        f"{memnodes} B + cgrt tables {tables} B)")
    if be.emulated:
        return cap
    tg = kept["torch"]
    tpool = pool_bytes(tg.pool)
    med = {k: statistics.median(v) for k, v in samples.items()}
    cap["samples_seconds"] = samples
    cap["torch"] = {"seconds_wall": med["torch_each"], "buckets": tg.buckets, "pool_bytes": tpool,
                    "seconds_capture_only": sum(b["capture_instantiate_seconds"] for b in tg.buckets),
                    "what": "per bucket, largest first: one eager run of the step on the capture side "
                            "stream, synchronize, torch.cuda.graph(g, pool=shared, stream=side) around "
                            "the same step (capture + instantiate); gc.collect and empty_cache off (vLLM). "
                            "Memory measurements between buckets are outside the timed part; seconds_wall: "
                            "the median of the samples"}
    cap["graph_memory_cgrt_over_torch_pool"] = None if not (cgrt_total and tpool) else cgrt_total / tpool
    cap["equal_policies"] = {
        "warmup_each": {"cgrt_seconds": med["cgrt_each"], "torch_seconds": med["torch_each"],
                        "cgrt_over_torch": med["cgrt_each"] / med["torch_each"]},
        "warmup_once": {"cgrt_seconds": med["cgrt_once"], "torch_seconds": med["torch_once"],
                        "cgrt_over_torch": med["cgrt_once"] / med["torch_once"]},
        "target": 0.5,
        "note": f"medians of {reps} samples per side and policy (samples_seconds), in alternating order; the "
                "whole bucket set of the same step; warmup_each: one eager run before each bucket's capture on "
                "both sides (cgrt warmup_once=0, instantiation on its worker thread; torch as vLLM); "
                "warmup_once: one eager run before the largest bucket only on both sides (cgrt's default)"}
    cap["cgrt_over_torch"] = cap["equal_policies"]["warmup_each"]["cgrt_over_torch"]
    ep = cap["equal_policies"]
    say(f"capture at equal policies (medians of {reps}): warm-up per bucket cgrt {med['cgrt_each']:.3f} s / "
        f"torch {med['torch_each']:.3f} s = {ep['warmup_each']['cgrt_over_torch']:.2f}; one warm-up cgrt "
        f"{med['cgrt_once']:.3f} s / torch {med['torch_once']:.3f} s = {ep['warmup_once']['cgrt_over_torch']:.2f}")
    cap["_torch_graphs"] = tg
    return cap


def make_ring(eng, n, ctx, block_table_host, rng_seed):
    """RING input sets for n requests at context ctx, each set its own tensors: request
    level (cgrt) and row level, padding rows inert (torch graph, eager)."""
    S, dev, page, cfg = eng.S, eng.be.device, eng.page, eng.cfg
    g = torch.Generator()
    g.manual_seed(rng_seed)
    ring = []
    for _ in range(RING):
        tok = torch.randint(0, cfg.vocab, (S,), generator=g)
        lens = torch.zeros(S, dtype=torch.int32)
        lens[:n] = ctx
        pos = torch.zeros(S, dtype=torch.int64)
        pos[:n] = ctx - 1
        slot = torch.full((S,), -1, dtype=torch.int64)
        p = ctx - 1
        slot[:n] = block_table_host[:n, p // page].long() * page + p % page
        rows_seq = torch.zeros(S, dtype=torch.int32)
        rows_seq[:n] = ctx
        rows_pos = torch.zeros(S, dtype=torch.int64)
        rows_pos[:n] = p
        ring.append({"token_ids": tok.to(dev), "req_seq_lens": lens.to(dev), "req_positions": pos.to(dev),
                     "seq_lens": rows_seq.to(dev), "positions": rows_pos.to(dev), "slot_mapping": slot.to(dev)})
    return ring


# How the host waits for each timed step (--wait): "poll" spins on an event query for the
# whole step; "sleep-poll" sleeps through 80% of the previous step's latency first, then
# spins (an engine does host work while its step runs rather than spin for all of it).
WAIT = "poll"


SYNC = []  # the synchronous step times (ms) of the last time_steps call


def time_steps_dl(be, gs, fn, iters, warm, deadline):
    """time_steps for a device-launched set: host part = the trigger call, then the host
    waits with gs.synchronize(); SYNC gets host part + wait. The latency is the GPU time
    the set reports for the step (stats last_device_step_ns: %globaltimer from the
    launcher's device-side launch to the step's last node), read after the wait."""
    lat, host = [], []
    del SYNC[:]
    with gc_off():
        be.synchronize()  # the other methods' work first: the step waits for no stream
        gs.synchronize()
        for i in range(warm + iters):
            if time.perf_counter() > deadline:
                break
            t0 = time.perf_counter()
            fn(i)
            t1 = time.perf_counter()
            gs.synchronize()
            t2 = time.perf_counter()
            if i >= warm:
                host.append((t1 - t0) * 1e6)
                SYNC.append((t2 - t0) * 1e3)
                ns = gs.stats()["last_device_step_ns"]
                if ns:
                    lat.append(ns / 1e6)
    return lat, host


def time_steps(be, stream, fn, iters, warm, deadline, pre=None, wait=None):
    """Synchronized steps: (latency ms list, host us list); pre() runs before each, untimed.
    The synchronous step (host part + GPU, until the host sees the step's end: what an
    engine waiting for its tokens sees) goes to SYNC. The garbage collector is off while
    they run (timing.gc_off), for every method alike."""
    with gc_off():
        return _time_steps(be, stream, fn, iters, warm, deadline, pre, wait or WAIT)


def _time_steps(be, stream, fn, iters, warm, deadline, pre, wait):
    lat, host = [], []
    del SYNC[:]
    last_ms = 0.0
    if not be.emulated:
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        evq = torch.cuda.Event()
    for i in range(warm + iters):
        if time.perf_counter() > deadline:
            break
        if be.emulated:
            t0 = time.perf_counter()
            fn(i)
            t1 = time.perf_counter()
            if i >= warm:
                lat.append((t1 - t0) * 1e3)
                host.append((t1 - t0) * 1e6)
                SYNC.append((t1 - t0) * 1e3)
            continue
        # wait for the GPU by polling (the host stays awake, as an engine's loop that polls
        # for its tokens; a blocking wait lets the core sleep, and the next call then pays
        # the wake-up: up to tens of us at 30 ms steps on the H200 machine)
        evq.record(stream)
        while not evq.query():
            pass
        if pre is not None:
            pre()
        ev0.record(stream)
        t0 = time.perf_counter()
        fn(i)
        t1 = time.perf_counter()
        ev1.record(stream)
        if wait == "block":  # a blocking wait: the core may sleep, the next call pays its wake-up
            ev1.synchronize()
        else:
            if wait == "sleep-poll" and last_ms >= 1.0:
                time.sleep(0.8 * last_ms / 1e3)
            while not ev1.query():
                pass
        t2 = time.perf_counter()
        last_ms = ev0.elapsed_time(ev1)
        if i >= warm:
            lat.append(last_ms)
            host.append((t1 - t0) * 1e6)
            SYNC.append((t2 - t0) * 1e3)
    return lat, host


HOST_TARGET_US = 10.0  # issue 15: host time per step (rebinding + launch)
# points where the prepared step is also timed with a blocking wait (the slow host
# medians were at (1, 8K) and (128, 32K); (1, 1K) as the control)
BLOCKING_POINTS = {(1, 1024), (1, 8192), (128, 32768)}
# The methods whose host time the point summaries list, in this order.
HOST_METHODS = ("cgrt_prepared", "cgrt_device_launch", "cgrt_nobind", "launch_floor", "torch_graph", "torch_graph_peer",
                "cgrt_prepared_blocking", "cgrt_prepared_sleep_poll", "cgrt_prepared_fixed")


def host_probe(eng, iters=2000):
    """The host's state right after a point's rounds: p50 / p99 of a ctypes call that does
    almost nothing in C (the CPU's own speed and noise at that moment), the load average,
    the core the process runs on and its clock (/proc/cpuinfo), the voluntary and
    involuntary context switches of the process during the point."""
    s = ctypes_call_us(eng, iters)
    res = {"ctypes_call_us_p50": s["p50"], "ctypes_call_us_p99": s["p99"]}
    try:
        res["loadavg"] = open("/proc/loadavg").read().split()[:3]
        cpu = proc_cpu()
        res["cpu"] = cpu
        mhz = [ln.split(":")[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("cpu MHz")]
        res["cpu_mhz"] = float(mhz[cpu]) if cpu < len(mhz) else None
        st = dict(ln.split(":", 1) for ln in open("/proc/self/status") if "ctxt_switches" in ln)
        res["ctxt_switches"] = {k.strip(): int(v) for k, v in st.items()}
    except Exception as e:  # noqa: BLE001 - best effort, recorded
        res["proc_error"] = repr(e)
    return res


def proc_cpu():
    """The core the process runs on (/proc/self/stat, field 39)."""
    return int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])


def host_state():
    """A snapshot for round_host: the core the process runs on, the machine's steal and
    total jiffies (/proc/stat: time the hypervisor gave the virtual CPUs to others) and the
    process's involuntary context switches; None where /proc does not say."""
    st = {"cpu": None, "steal": None, "total": None, "nonvoluntary": None}
    try:
        st["cpu"] = proc_cpu()
        f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        st["steal"], st["total"] = (f[7] if len(f) > 7 else None), sum(f)
        for ln in open("/proc/self/status"):
            if ln.startswith("nonvoluntary_ctxt_switches"):
                st["nonvoluntary"] = int(ln.split(":")[1])
    except (OSError, ValueError, IndexError):
        pass
    return st


def round_host(eng, a, b, iters=200):
    """What the host was like during one round (snapshots a, b of host_state at its start and
    end): the cores at both ends, the share of the machine's CPU time stolen by the
    hypervisor, the involuntary switches, and the p50 of a near-empty ctypes call right after
    (the CPU's own speed then: a round whose steps are all slow on the host shows it here
    too if the cause is the core, not cgrt)."""
    d = lambda k: (b[k] - a[k]) if a[k] is not None and b[k] is not None else None  # noqa: E731
    tot = d("total")
    return {"cpu_start": a["cpu"], "cpu_end": b["cpu"],
            "steal_share": (d("steal") / tot) if tot and d("steal") is not None else None,
            "nonvoluntary_switches": d("nonvoluntary"),
            "ctypes_call_us_p50": ctypes_call_us(eng, iters)["p50"]}


def ctypes_call_us(eng, iters=2000):
    """Host time (us; summarize_ms of the samples) of a ctypes call of the decode set that
    does almost nothing in C (cgrt_graphs_bucket_rows)."""
    f, h = cg.cgrt.lib.cgrt_graphs_bucket_rows, eng.decode_set.handle
    us = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f(h, 0, 1)
        us.append((time.perf_counter() - t0) * 1e6)
    return summarize_ms(us)


def ctypes_floor_us(eng, iters=2000):
    """p50 of ctypes_call_us: subtracted from a raw step's host time, it estimates the C
    call's own host time (cgrt_graphs_step: patching and launch)."""
    return ctypes_call_us(eng, iters)["p50"]


HOST_P99_TARGET_US = 40.0


def host_overhead(pt, floor_us):
    """The point's host times (p50 and p99 over all timed steps, the quietest round's p50
    beside them) next to the targets (PreparedStep p50 <= 10 us, p99 <= 40 us), and where a
    prepared step's time over the bare cuGraphLaunch goes: cgrt's step path without
    bindings over the launch (nobind - launch_floor) and the bindings with the
    PreparedStep's Python (prepared - nobind)."""
    m = pt["methods"]
    get = lambda k, q="p50": m[k]["host_us"].get(q) if k in m and m[k]["host_us"] else None  # noqa: E731
    h = {"target_us_p50": HOST_TARGET_US, "target_us_p99": HOST_P99_TARGET_US, "ctypes_floor_us_p50": floor_us,
         "samples_per_method": pt.get("rounds", 0) * pt.get("steps_per_round", 0)}
    for k in HOST_METHODS:
        if k in m:
            h[k] = {"p50": get(k), "p99": get(k, "p99"), "best_round_p50": get(k, "best_round_p50")}
    prep, nob, lf = get("cgrt_prepared"), get("cgrt_nobind"), get("launch_floor")
    if prep is not None:
        h["prepared_meets_p50_target"] = prep <= HOST_TARGET_US
        h["prepared_meets_p99_target"] = get("cgrt_prepared", "p99") <= HOST_P99_TARGET_US
        if nob is not None:
            h["breakdown_us"] = {"bindings_and_python": prep - nob}
            if lf is not None:
                h["breakdown_us"].update(step_path_over_launch=nob - lf, launch_floor=lf)
            fix = get("cgrt_prepared_fixed")
            if fix is not None:  # bindings_and_python = moves + the call with nothing moved
                h["breakdown_us"].update(moves=prep - fix, prepared_call_unmoved=fix - nob)
        say(f"  host: prepared p50 {prep:.1f} us p99 {get('cgrt_prepared', 'p99'):.1f} us; floors: no-binding step "
            f"{nob if nob is None else round(nob, 1)} us, bare cuGraphLaunch {lf if lf is None else round(lf, 1)} us")
    dl = get("cgrt_device_launch")
    if dl is not None:  # the same PreparedStep on the device-launched set
        h["device_launch_meets_p50_target"] = dl <= HOST_TARGET_US
        h["device_launch_meets_p99_target"] = get("cgrt_device_launch", "p99") <= HOST_P99_TARGET_US
    pt["host_time"] = h


def host_summary(out):
    """One line per point: the host times against the targets (also in the JSON)."""
    rows = [dict(batch=p["batch"], context=p["context"], **p["host_time"]) for p in out.get("points", [])
            if "host_time" in p]
    out["host_time_summary"] = rows
    if not rows:
        return
    say(f"host time per step, p50 / p99 over all timed steps (us); targets: PreparedStep p50 <= {HOST_TARGET_US:.0f}, "
        f"p99 <= {HOST_P99_TARGET_US:.0f}:")
    fmt = lambda v: "   -  " if v is None else f"{v:6.1f}"  # noqa: E731
    for r in rows:
        parts = []
        for k in HOST_METHODS:
            if k in r:
                parts.append(f"{k} {fmt(r[k]['p50'])}/{fmt(r[k]['p99'])}")
        say(f"  batch {r['batch']:4d} ctx {r['context']:6d}: " + "  ".join(parts))


def device_launch_set(args, be, eng, out):
    """The decode set again, device-launched (cgrt_device_launch), captured; None when
    left out or refused (recorded in out["device_launch"])."""
    if not args.device_launch:
        out["device_launch"] = {"used": False, "why": "--no-device-launch"}
        return None
    try:
        t0 = time.perf_counter()
        gs = eng.new_decode_set(device_launch=1, device_patch=1)
        gs.capture()
        b = gs.buckets()
        out["device_launch"] = {"used": True, "capture_seconds": time.perf_counter() - t0,
                                "buckets": len(b), "device_launched_buckets": sum(x["device_launch"] for x in b),
                                "idle_us": 2000}
        say(f"device-launched decode set: {out['device_launch']['device_launched_buckets']} of {len(b)} buckets "
            f"launched from the device, captured in {out['device_launch']['capture_seconds']:.2f} s")
        return gs
    except Exception as e:  # recorded, not fatal: the other methods still run
        out["device_launch"] = {"used": False, "why": f"{type(e).__name__}: {e}"}
        say(f"device-launched decode set refused: {e}")
        return None


def bench_points(args, be, eng, tgs, stream, bt_static, deadline, out):
    cfg, S = eng.cfg, eng.S
    points = []
    gs_dl = device_launch_set(args, be, eng, out)
    if not be.emulated:
        # steady state first (an engine steps continuously): one second of synchronized
        # 1-request steps, untimed, so the first point does not pay for a cold host or GPU
        gs, t_end = eng.decode_set, time.perf_counter() + 1.0
        while time.perf_counter() < t_end:
            gs.step(1)
            be.synchronize()
    floor_us = ctypes_floor_us(eng)
    out["ctypes_floor_us_p50"] = floor_us
    host_bt = bt_static.cpu()
    to_profile = []  # (point, step functions): --profile-kernels, after the timed points
    eager_out = {"out_tokens": torch.zeros_like(eng.dec["out_tokens"]),
                 "out_hidden": torch.zeros_like(eng.dec["out_hidden"])}
    for ctx in args.contexts:
        for n in args.batches:
            if time.perf_counter() > deadline:
                points.append({"batch": n, "context": ctx, "skipped": "deadline"})
                say(f"skip batch {n} ctx {ctx}: deadline")
                continue
            if ctx + 8 > eng.max_model_len or n > S:
                points.append({"batch": n, "context": ctx, "skipped": "outside the engine's sizes"})
                continue
            B = eng.decode_set.bucket_rows(n)
            ring = make_ring(eng, n, ctx, host_bt, 1000 + n + ctx)
            pt = {"batch": n, "context": ctx, "bucket": B, "methods": {}}
            est = None

            gs = eng.decode_set
            names = ("token_ids", "req_seq_lens", "req_positions")
            gs.step(n, bind={"block_table": bt_static, **{k: ring[0][k] for k in names}})
            probe, _ = time_steps(be, stream, lambda i: gs.step(n), 3, 1, deadline)
            est = summarize_ms(probe)["p50"] if probe else 1.0
            iters = args.iters
            if args.point_seconds:  # optional cap (quick runs); the default times args.iters steps
                iters = max(8, min(iters, int(args.point_seconds * 1e3 / max(est, 1e-3))))
            rounds = max(1, min(args.rounds, iters))
            preps = [gs.prepare({k: inp[k] for k in names}) for inp in ring]
            if gs_dl is not None:
                gs_dl.step(n, bind={"block_table": bt_static, **{k: ring[0][k] for k in names}})
                gs_dl.synchronize()
                preps_dl = [gs_dl.prepare({k: inp[k] for k in names}) for inp in ring]
            fl = Floors(gs, B)
            # (name, step, warm-up steps, untimed pre-step hook, after the block)
            methods = [
                ("cgrt_prepared", lambda i: preps[i % RING](n), 2, None, None),
                ("cgrt_nobind", lambda i: fl.nobind(n), 2, None, None),
            ]
            if gs_dl is not None:
                methods.append(("cgrt_device_launch", lambda i: preps_dl[i % RING](n), 2, None, None))
            if fl.launch_fn is not None:  # the direct launches prepared and not made yet, after the block
                methods.append(("launch_floor", fl.launch, 2, fl.before, fl.finish))
            for t in tgs:
                methods.append((t.name, (lambda t, Bt: lambda i: t.step(ring[i % RING], Bt))(t, t.bucket(n)), 2,
                                None, None))
            if (n, ctx) in BLOCKING_POINTS:  # the same step, the host waiting otherwise
                methods.append(("cgrt_prepared_blocking", lambda i: preps[i % RING](n), 2, None, None))
                methods.append(("cgrt_prepared_sleep_poll", lambda i: preps[i % RING](n), 2, None, None))
                methods.append(("cgrt_prepared_fixed", lambda i: preps[0](n), 2, None, None))
            # rounds, methods interleaved: slow drifts (clocks, temperature) and bursts of host
            # noise hit all alike; each method times ceil(iters / rounds) steps per round
            acc = {m[0]: ([], [], []) for m in methods}
            round_p50 = {m[0]: [] for m in methods}  # host us p50 of each round, per method
            patched = {m[0]: dict.fromkeys(("steps", "nodes_patched", "device_patches", "device_nodes_patched",
                                             "launcher_starts"), 0)
                       for m in methods}
            per_round = max(1, -(-iters // rounds))
            pt["round_host"] = []
            for rnd in range(rounds):
                h0 = host_state()
                for name, fn, warm, pre, after in methods:
                    g = gs_dl if name == "cgrt_device_launch" else gs
                    s0 = g.stats()
                    if name == "cgrt_device_launch":
                        lat, host = time_steps_dl(be, gs_dl, fn, per_round, warm, deadline)
                    else:
                        lat, host = time_steps(be, stream, fn, per_round, warm, deadline, pre,
                                               wait="block" if name.endswith("_blocking") else
                                               "sleep-poll" if name.endswith("_sleep_poll") else None)
                    s1 = g.stats()
                    for key in patched[name]:
                        patched[name][key] += s1[key] - s0[key]
                    acc[name][0].extend(lat)
                    acc[name][1].extend(host)
                    acc[name][2].extend(SYNC)
                    if host:
                        round_p50[name].append(summarize_ms(host)["p50"])
                    if after is not None:
                        after()
                pt["round_host"].append(round_host(eng, h0, host_state()))
            pt["rounds"], pt["steps_per_round"] = rounds, per_round
            pt["host_probe"] = host_probe(eng)
            attention = {t.name: t.attention for t in tgs}
            for name, (lat, host, sync) in acc.items():
                st, hs = summarize_ms(lat), summarize_ms(host)
                if hs:
                    # secondary: timeit's convention against host noise, the quietest round's p50
                    hs["round_p50"] = round_p50[name]
                    hs["best_round_p50"] = min(round_p50[name])
                c = patched[name]
                per = (lambda k: c[k] / c["steps"]) if c["steps"] else (lambda k: None)  # noqa: E731
                pt["methods"][name] = {"attention": attention.get(name, "cgrt"),
                                       "latency_ms": st, "host_us": hs, "sync_step_ms": summarize_ms(sync),
                                       "tokens_per_s": (n / (st["p50"] / 1e3)) if st else None,
                                       "per_step": {"host_patched_nodes": per("nodes_patched"),
                                                    "device_patch_launches": per("device_patches"),
                                                    "device_patched_nodes": per("device_nodes_patched"),
                                                    "launcher_starts": per("launcher_starts"),
                                                    "cgrt_steps": c["steps"]}}
                if name == "cgrt_device_launch":
                    pt["methods"][name]["latency_source"] = "stats.last_device_step_ns (%globaltimer)"
                if st:
                    ss = summarize_ms(sync)
                    say(f"  {name:18s} batch {n:3d} ctx {ctx:5d}: GPU p50 {st['p50']:.3f} ms p99 {st['p99']:.3f} ms, "
                        f"sync step p50 {ss['p50']:.3f} ms, host p50 {hs['p50']:.1f} us p99 {hs['p99']:.1f} us "
                        f"(n {hs['n']})")
            cm = pt["methods"]["cgrt_prepared"]["latency_ms"]
            pt["ratios"] = {}
            for t in tgs:
                tm = pt["methods"][t.name]["latency_ms"]
                if cm and tm:
                    pt["ratios"]["cgrt_over_" + t.name] = cm["p50"] / tm["p50"]
                    pt["ratios"]["cgrt_over_" + t.name + "_sync"] = (pt["methods"]["cgrt_prepared"]["sync_step_ms"]["p50"]
                                                                     / pt["methods"][t.name]["sync_step_ms"]["p50"])
                dm = pt["methods"].get("cgrt_device_launch", {}).get("sync_step_ms")
                if dm and pt["methods"][t.name]["sync_step_ms"]:
                    pt["ratios"]["cgrt_device_launch_over_" + t.name + "_sync"] = (
                        dm["p50"] / pt["methods"][t.name]["sync_step_ms"]["p50"])
            say(f"  ratios: {({k: round(v, 3) for k, v in pt['ratios'].items()})}")
            host_overhead(pt, floor_us)

            def run(name, fn, iters, warm, pre=None):
                lat, host = time_steps(be, stream, fn, iters, warm, deadline, pre)
                st = summarize_ms(lat)
                pt["methods"][name] = {"latency_ms": st, "host_us": summarize_ms(host),
                                       "tokens_per_s": (n / (st["p50"] / 1e3)) if st else None}
                if st:
                    say(f"  {name:16s} batch {n:3d} ctx {ctx:5d}: p50 {st['p50']:.3f} ms p99 {st['p99']:.3f} ms, "
                        f"host p50 {summarize_ms(host)['p50']:.1f} us")

            def eager(i):
                inp = ring[i % RING]
                io = {"token_ids": inp["token_ids"], "positions": inp["positions"], "seq_lens": inp["seq_lens"],
                      "slot_mapping": inp["slot_mapping"], "block_table": bt_static}
                io.update(eager_out)
                eng.model.forward(Exec(be, be.stream_handle(), kernels=False), io, n, eng.plan)
            if args.eager_iters:
                run("eager", eager, max(3, min(args.eager_iters, iters)), 1)

            # same inputs through each method: outputs compared
            if time.perf_counter() < deadline:
                inp = ring[0]
                preps[0](n)
                be.synchronize()
                p_tok, p_h = eng.dec["out_tokens"][:n].clone(), eng.dec["out_hidden"][:n].clone()
                gs.step(n, bind={k: inp[k] for k in names})
                be.synchronize()
                c_tok, c_h = eng.dec["out_tokens"][:n].clone(), eng.dec["out_hidden"][:n].clone()
                chk = {"prepared_bitwise_equal_package": bool(torch.equal(p_tok, c_tok) and torch.equal(p_h, c_h))}
                for t in tgs:
                    t.step(inp, t.bucket(n))
                    be.synchronize()
                    to, th = t.io["out_tokens"][:n], t.io["out_hidden"][:n]
                    chk[t.name + "_bitwise_equal"] = bool(torch.equal(c_tok, to) and torch.equal(c_h, th))
                    chk[t.name + "_max_hidden_diff"] = float((c_h.float() - th.float()).abs().max())
                    chk[t.name + "_token_agreement"] = float((c_tok == to).float().mean())
                eager(0)
                be.synchronize()
                chk["eager_unpadded_max_hidden_diff"] = float((c_h.float() - eager_out["out_hidden"][:n].float()).abs().max())
                chk["eager_unpadded_token_agreement"] = float((c_tok == eager_out["out_tokens"][:n]).float().mean())
                pt["checks"] = chk
            if args.profile_kernels and not be.emulated:
                # profiled after everything is timed (profile_points): once the profiler has
                # run, CUPTI stays attached to the process and every later launch pays for it
                fns = [("cgrt_prepared", (lambda preps, n: lambda i: preps[i % RING](n))(preps, n))]
                fns += [(t.name, (lambda t, Bt, ring: lambda i: t.step(ring[i % RING], Bt))(t, t.bucket(n), ring))
                        for t in tgs]
                to_profile.append((pt, fns))
            pt["kv_bytes_read_per_step"] = n * ctx * cfg.latent * 2 * cfg.layers
            points.append(pt)
            out["points"] = points
            write(out, args.out)
    return to_profile


def profile_points(to_profile, out, path):
    """--profile-kernels: each point's kernel profile, run after everything timed (the decode
    points and the speculative-decoding part), since CUPTI stays attached afterwards."""
    for pt, fns in to_profile:
        say(f"kernel profile batch {pt['batch']} ctx {pt['context']}")
        try:
            pt["kernel_profile"] = kernel_profile(fns)
        except Exception as e:  # noqa: BLE001 - recorded; the timed figures stand
            torch.cuda.synchronize()
            pt["kernel_profile"] = {"error": repr(e)[:1000]}
            say(f"kernel profile failed: {e!r}")
    if to_profile:
        write(out, path)


MLA_KERNELS = ("cgrt_mla_", "flash_fwd_splitkv_mla", "flash_fwd_mla_combine", "get_mla_metadata")
MLA_SPLITS = ("cgrt_mla_split", "flash_fwd_splitkv_mla")


def attention_sections(evs):
    """The attention of each layer on the GPU's clock (evs: a profile's kernels in start
    order): per MLA call (a split kernel), the section from the end of the last kernel
    before it that is not MLA (split, combine, metadata) to the start of the first one after
    it, and its parts: that kernel's end to the split's start, the split's duration (with
    programmatic launch it starts before the kernel ahead ends and waits on the device),
    the split's end to the last MLA kernel's end (the merge), that end to the next
    kernel's start. Medians, p90 and the count over every call of every profiled step."""
    def is_mla(n):
        return any(k in n for k in MLA_KERNELS)
    parts = {"section": [], "before_split": [], "split": [], "merge_tail": [], "to_next": []}
    for i, e in enumerate(evs):
        if not any(k in e.name for k in MLA_SPLITS):
            continue
        j, k = i - 1, i + 1
        while j >= 0 and is_mla(evs[j].name):
            j -= 1
        while k < len(evs) and is_mla(evs[k].name):
            k += 1
        if j < 0 or k >= len(evs):
            continue
        a, b = evs[j].time_range.end, evs[k].time_range.start
        if b - a > 200:  # a step boundary (steps are separated by a synchronize)
            continue
        mla_end = max(x.time_range.end for x in evs[i:k])
        parts["section"].append(b - a)
        parts["before_split"].append(e.time_range.start - a)
        parts["split"].append(e.time_range.end - e.time_range.start)
        parts["merge_tail"].append(mla_end - e.time_range.end)
        parts["to_next"].append(b - mla_end)
    out = {}
    for key, v in parts.items():
        if v:
            v = sorted(v)
            out[key + "_us"] = {"p50": v[len(v) // 2], "p90": v[min(len(v) - 1, (9 * len(v)) // 10)], "n": len(v)}
    return out


def kernel_profile(fns, steps=5):
    """GPU kernels of each method's step (torch.profiler, CUPTI; graph kernels included):
    per method the kernels and their summed time per step, the span from the first
    kernel's start to the last one's end per step (span - sum: gaps between kernels), and
    the kernels by name (time and count per step), largest first."""
    from torch.profiler import ProfilerActivity, profile
    res = {}
    for name, fn in fns:
        for i in range(2):
            fn(i)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for i in range(steps):
                fn(i)
                torch.cuda.synchronize()
        evs = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")
               and getattr(e, "time_range", None) is not None]
        evs = [e for e in evs if not e.name.startswith(("Memcpy", "Memset", "cudaStream", "cudaGraph"))]
        evs.sort(key=lambda e: e.time_range.start)
        by = {}
        for e in evs:
            d = by.setdefault(e.name, [0.0, 0])
            d[0] += e.time_range.elapsed_us()
            d[1] += 1
        total = sum(v[0] for v in by.values())
        # steps are separated by a synchronize: a gap over 200 us starts a new step
        spans, t0, t1 = [], None, None
        for e in evs:
            if t0 is None or e.time_range.start - t1 > 200:
                if t0 is not None:
                    spans.append(t1 - t0)
                t0 = e.time_range.start
            t1 = e.time_range.end if t1 is None else max(t1, e.time_range.end)
        if t0 is not None:
            spans.append(t1 - t0)
        top = sorted(by.items(), key=lambda kv: -kv[1][0])[:30]
        res[name] = {"steps": steps, "kernels_per_step": len(evs) / steps, "kernel_us_per_step": total / steps,
                     "span_us_per_step": (sum(spans) / len(spans)) if spans else None, "spans_found": len(spans),
                     "attention": attention_sections(evs),
                     "by_name": [{"name": k[:120], "us_per_step": v[0] / steps, "count_per_step": v[1] / steps}
                                 for k, v in top]}
        r = res[name]
        say(f"  profile {name}: {r['kernels_per_step']:.0f} kernels, {r['kernel_us_per_step']:.1f} us of kernels, "
            f"span {r['span_us_per_step'] or 0:.1f} us per step")
    return res


def _spec_state(eng, n, ctx, rng):
    S, dev = eng.Ss, eng.be.device
    L = torch.zeros(S, dtype=torch.int32)
    L[:n] = ctx
    P = torch.zeros(S, dtype=torch.int64)
    P[:n] = ctx - 1
    eng.sL.copy_(L.to(dev))
    eng.sP.copy_(P.to(dev))
    eng.sx.copy_(torch.tensor([rng.randrange(eng.cfg.vocab) for _ in range(S)]).to(dev))
    eng.sbt.copy_(eng.bench_bt[:S])
    for t in (eng.sh, eng.out_log, eng.cursor, eng.acc_sum, eng.match_sum, eng.iters):
        t.zero_()


def plain_decode_ms(be, eng, stream, n, ctx, iters=20):
    """Plain decode through the decode set at n requests, context ctx: GPU ms p50 and the
    synchronous step p50 (the figure tokens/s of plain decoding comes from)."""
    dev = be.device
    S = eng.S
    inputs = {"token_ids": torch.randint(0, eng.cfg.vocab, (S,), device=dev),
              "req_seq_lens": torch.full((S,), ctx, dtype=torch.int32, device=dev),
              "req_positions": torch.full((S,), ctx - 1, dtype=torch.int64, device=dev),
              "block_table": eng.bench_bt}
    gs = eng.decode_set
    ps = gs.prepare(inputs)
    lat, _ = time_steps(be, stream, lambda i: ps(n), iters, 2, float("inf"))
    return summarize_ms(lat)["p50"], summarize_ms(SYNC)["p50"]


def bench_spec(args, be, eng, stream, deadline, out):
    """Speculative decoding with k = 1..k_max drafts at batch args.spec_batches, context
    args.spec_context: per (k, batch) a forced-acceptance run (alpha args.alpha, tokens/s
    as a drafter that agrees that often would give) and a real-rule run (greedy
    acceptance on the device, its tokens compared with plain greedy decoding through the
    decode set from the same state), against plain decode's tokens/s."""
    import spec as spec_mod
    rows, plain = [], {}
    ctx = args.spec_context
    out["spec"]["context"] = ctx
    out["spec"]["forced_alpha"] = args.alpha
    for n in args.spec_batches:
        if n <= eng.S:
            g, sy = plain_decode_ms(be, eng, stream, n, ctx)
            plain[n] = {"gpu_ms_p50": g, "sync_ms_p50": sy, "tokens_per_s": n / (sy / 1e3)}
            say(f"  plain decode batch {n:3d} ctx {ctx}: {sy:.3f} ms per step -> {plain[n]['tokens_per_s']:.0f} tok/s")
    out["spec"]["plain_decode"] = plain
    for k in args.spec_ks:
        if time.perf_counter() > deadline:
            rows.append({"k": k, "skipped": "deadline"})
            continue
        eng.set_spec_k(k)
        td, tv = eng.capture_spec()
        chk = spec_check(be, eng)
        say(f"  k={k}: captured draft/verify sets in {td:.2f} + {tv:.2f} s; graphs vs eager: {chk['bitwise_equal']}")
        for n in args.spec_batches:
            if time.perf_counter() > deadline or n > eng.Ss:
                rows.append({"k": k, "batch": n, "skipped": "deadline" if n <= eng.Ss else "too large"})
                continue
            rng = random.Random(7 + n)
            for rule, alpha in (("forced", args.alpha), ("real", None)):
                eng.set_alpha(alpha)
                _spec_state(eng, n, ctx, rng)
                snap = spec_mod.snapshot(eng)
                iters = args.spec_iters
                if not be.emulated:
                    evs = [torch.cuda.Event(enable_timing=True) for _ in range(2 * iters + 1)]
                be.synchronize()
                t0 = time.perf_counter()
                for i in range(iters):
                    if not be.emulated:
                        evs[2 * i].record(stream)
                    eng.draft(n)
                    if not be.emulated:
                        evs[2 * i + 1].record(stream)
                    eng.verify_set.step(n * (k + 1))
                if not be.emulated:
                    evs[-1].record(stream)
                host_ms = (time.perf_counter() - t0) * 1e3
                be.synchronize()
                wall_ms = (time.perf_counter() - t0) * 1e3
                if be.emulated:
                    draft_ms = total_ms = host_ms
                else:
                    draft_ms = sum(evs[2 * i].elapsed_time(evs[2 * i + 1]) for i in range(iters))
                    total_ms = evs[0].elapsed_time(evs[-1])
                st = spec_mod.snapshot(eng)
                acc, emitted = int(st["acc"][:n].sum()), int(st["cursor"][:n].sum())
                proposed = n * k * iters
                r = {"k": k, "batch": n, "context": ctx, "rule": rule, "alpha": alpha, "iterations": iters,
                     "proposed": proposed, "accepted": acc, "acceptance_rate": acc / proposed, "emitted": emitted,
                     "greedy_matches": int(st["match"][:n].sum()), "draft_loop_ms": draft_ms,
                     "iteration_ms_total": total_ms, "wall_ms_with_sync": wall_ms, "host_ms_total": host_ms,
                     "draft_ms_per_proposed_token": draft_ms / proposed,
                     "draft_ms_per_iteration": draft_ms / iters,
                     "ms_per_emitted_token": total_ms / max(1, emitted),
                     "tokens_per_s": emitted / (total_ms / 1e3) if total_ms else None,
                     "host_syncs_inside_loop": 0, "graph_launches_per_iteration": 2}
                if n in plain and r["tokens_per_s"]:
                    r["speedup_over_plain_decode"] = r["tokens_per_s"] / plain[n]["tokens_per_s"]
                if rule == "real":
                    spec_mod.restore(eng, snap)
                    steps = int(st["cursor"][:n].max())
                    ref_tok, ref_lg = spec_mod.greedy_reference(eng, snap, n, steps, graphs=True)
                    r["greedy_check"] = spec_mod.compare_with_greedy(st, n, ref_tok, ref_lg)
                    r["greedy_check"]["mismatch_details"] = r["greedy_check"]["mismatch_details"][:16]
                rows.append(r)
                say(f"  spec k={k} batch {n:3d} {rule:6s}: {acc}/{proposed} accepted, {emitted} emitted, "
                    f"{r['tokens_per_s'] or 0:.0f} tok/s"
                    + (f" ({r['speedup_over_plain_decode']:.2f}x plain)" if "speedup_over_plain_decode" in r else "")
                    + f", draft {r['draft_ms_per_proposed_token'] * 1e3:.1f} us/proposed token"
                    + (f"; vs greedy: {r['greedy_check']['mismatches']} mismatches of "
                       f"{r['greedy_check']['compared']}" if rule == "real" else ""))
        out["spec"].setdefault("checks", {})[f"k{k}"] = chk
        out["spec"]["points"] = rows
        write(out, args.out)
    eng.set_alpha(None)
    return rows


def spec_check(be, eng):
    """One round of the speculative loop through graphs against its eager run."""
    import spec as spec_mod
    k, n, iters = eng.k, min(4, eng.Ss), 3
    rng = random.Random(3)
    dev = be.device
    S = eng.Ss
    eng.sL.zero_()
    eng.sP.zero_()
    ctx = min(1000, eng.max_model_len - iters * (k + 1) - k - 2)
    eng.sL[:n] = ctx
    eng.sP[:n] = ctx - 1
    eng.sx.copy_(torch.tensor([rng.randrange(eng.cfg.vocab) for _ in range(S)]).to(dev))
    eng.sbt.copy_(eng.bench_bt[:S])
    for t in (eng.sh, eng.out_log, eng.cursor, eng.acc_sum, eng.match_sum, eng.iters):
        t.zero_()
    snap = spec_mod.snapshot(eng)
    for _ in range(iters):
        eng.spec_iteration(n)
    be.synchronize()
    got = spec_mod.snapshot(eng)
    spec_mod.restore(eng, snap)
    Bd, Bv = eng.draft_set.bucket_rows(n), eng.verify_set.bucket_rows(n * (k + 1))
    for _ in range(iters):
        eng.eager_spec_iteration(n, Bd, Bv)
    be.synchronize()
    bad = spec_mod.compare(eng, got, spec_mod.snapshot(eng), n)
    return {"requests": n, "iterations": iters, "context": ctx, "bitwise_equal": not bad, "differs_in": bad}


def table(out):
    """The issue's table as text lines: per point GPU ms p50 of cgrt PreparedStep / torch
    graph (same model) / torch_graph_peer, cgrt over the peer, the synchronous step of
    both, cgrt's host p50 / p99 and nodes per step; then capture and spec summaries."""
    lines = ["batch  ctx    | GPU ms p50: cgrt  torch  peer  | cgrt/peer | sync ms: cgrt  peer | "
             "host us cgrt p50/p99  peer p50 | nodes cgrt"]
    nodes = out.get("nodes_per_step", {}).get("cgrt", {})
    for p in out.get("points", []):
        if "methods" not in p:
            lines.append(f"{p['batch']:5d} {p['context']:6d}  skipped: {p.get('skipped')}")
            continue
        m = p["methods"]
        g = lambda k, f="latency_ms", q="p50": (m[k][f] or {}).get(q) if k in m else None  # noqa: E731
        f = lambda v, w=6, d=3: (" " * (w - 1) + "-") if v is None else f"{v:{w}.{d}f}"  # noqa: E731
        r = p.get("ratios", {}).get("cgrt_over_torch_graph_peer")
        lines.append(f"{p['batch']:5d} {p['context']:6d} | {f(g('cgrt_prepared'))} {f(g('torch_graph'))} "
                     f"{f(g('torch_graph_peer'))} | {f(r, 5)} | {f(g('cgrt_prepared', 'sync_step_ms'))} "
                     f"{f(g('torch_graph_peer', 'sync_step_ms'))} | {f(g('cgrt_prepared', 'host_us'), 5, 1)} / "
                     f"{f(g('cgrt_prepared', 'host_us', 'p99'), 5, 1)}  {f(g('torch_graph_peer', 'host_us'), 5, 1)} | "
                     f"{nodes.get(str(p.get('bucket')), '-')}")
    ep = out.get("capture", {}).get("equal_policies")
    if ep:
        lines.append(f"capture cgrt/torch: warm-up per bucket {ep['warmup_each']['cgrt_over_torch']:.2f}, "
                     f"one warm-up {ep['warmup_once']['cgrt_over_torch']:.2f}")
    for r in out.get("spec", {}).get("points", []):
        if "tokens_per_s" in r:
            lines.append(f"spec k={r['k']} batch {r['batch']:3d} {r['rule']:6s}: {r['tokens_per_s']:.0f} tok/s "
                         f"({r.get('speedup_over_plain_decode', 0):.2f}x plain), accepted {r['acceptance_rate']:.2f}, "
                         f"draft {r['draft_ms_per_proposed_token'] * 1e3:.1f} us/token"
                         + (f", greedy mismatches {r['greedy_check']['mismatches']}/{r['greedy_check']['compared']}"
                            + (f" (reference margins <= {r['greedy_check']['largest_mismatch_margin']:.3g})"
                               if r["greedy_check"].get("largest_mismatch_margin") is not None else "")
                            if "greedy_check" in r else ""))
    return lines


def pick_peer(peers_dir, out):
    """The best available peer of bench/peers/mla_peers.py: FlashMLA, else FlashInfer.
    out["peers"] records what loaded and why the others did not."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "peers"))
    try:
        import mla_peers
        got = mla_peers.load(peers_dir=peers_dir)
    except Exception as e:  # noqa: BLE001 - reported; the method is then skipped
        out["peers"] = {"error": repr(e)}
        say(f"no peers: {e!r}")
        return None
    out["peers"] = {name: (p if isinstance(p, str) else {"name": p.name, "version": p.version})
                    for name, p in got.items()}
    ok = {name: p for name, p in got.items() if not isinstance(p, str)}
    for want in ("flashmla", "flashinfer"):
        for name, p in ok.items():
            if want in name.lower().replace("_", "").replace("-", ""):
                out["peers"]["chosen"] = name
                say(f"torch_graph_peer: attention by {p.name} {p.version}")
                return p
    say(f"torch_graph_peer: no usable peer ({out['peers']})")
    return None


def nodes_per_step(eng, tgs, batches, bt_static):
    """Nodes of the captured decode step per bucket: cgrt's graphs (every node, cgrt's
    metadata and device-patch kernels included) and, for the measured batches, the same
    step captured by torch (kernel nodes by type; cuGraphGetNodes)."""
    res = {"cgrt": {str(b["rows"]): b["nodes"] for b in eng.decode_set.buckets() if b["captured"]},
           "note": "cgrt: all nodes of each bucket's graph (cgrt_graph_bucket_info.nodes); torch methods: "
                   "the same step captured into a kept torch graph, nodes by type"}
    if eng.be.emulated:
        return res
    for t in tgs:
        res[t.name] = {}
        for n in batches:
            try:
                res[t.name][str(t.bucket(n))] = t.count_nodes(t.bucket(n), bt_static)
            except Exception as e:  # noqa: BLE001 - reported in place of the count
                res[t.name][str(t.bucket(n))] = {"error": repr(e)}
    parts = [f"cgrt {res['cgrt']}"]
    for t in tgs:
        parts.append(t.name + " " + str({b: c.get("kernel", c) for b, c in res[t.name].items()}))
    say("nodes per step: " + "; ".join(parts))
    return res


def write(out, folder):
    path = os.path.join(folder, "model_decode.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=str)


def _finish_plot(plt, fig, ax, pts, ylabel, title, path):
    """Batch on a log2 axis with the measured batches as ticks, log y, saved as PNG."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({p["batch"] for p in pts}))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("batch (requests)")
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plots(out, folder):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        say(f"no plots: matplotlib unavailable ({e})")
        return []
    files = []
    pts = [p for p in out.get("points", []) if "methods" in p]
    ctxs = sorted({p["context"] for p in pts})
    methods = ["cgrt_prepared", "torch_graph", "torch_graph_peer"]
    style = {"cgrt_prepared": "P-", "cgrt_device_launch": "^-", "cgrt_nobind": "o:", "launch_floor": "v--",
             "torch_graph": "D-", "torch_graph_peer": "s-", "eager": "x-"}
    gpu = out["meta"].get("gpu") or out["meta"].get("device")
    for ctx in ctxs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for m in methods:
            xs = [(p["batch"], p["methods"][m]["latency_ms"]["p50"]) for p in pts
                  if p["context"] == ctx and m in p["methods"] and p["methods"][m]["latency_ms"]]
            if xs:
                ax.plot([x for x, _ in xs], [y for _, y in xs], style[m], label=m)
        files.append(_finish_plot(plt, fig, ax, pts, "step latency p50 (ms)",
                                  f"DeepSeek-V2-Lite-shaped decode step, context {ctx}\n{gpu}",
                                  os.path.join(folder, f"latency_ctx{ctx}.png")))
    def host_plot(ms, key, agg, ylabel, title, name):
        """Host time per batch: agg over the contexts of each point's host_us[key]."""
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for m in ms:
            xs = sorted({p["batch"] for p in pts if m in p["methods"] and p["methods"][m]["host_us"]})
            ys = [agg([p["methods"][m]["host_us"].get(key, float("nan")) for p in pts
                       if p["batch"] == b and m in p["methods"] and p["methods"][m]["host_us"]]) for b in xs]
            if xs:
                ax.plot(xs, ys, style[m], label=m)
        ax.axhline(HOST_TARGET_US if key != "p99" else 40.0, color="gray", lw=0.8, ls=":", label="target")
        files.append(_finish_plot(plt, fig, ax, pts, ylabel, f"{title}\n{gpu}", os.path.join(folder, name)))

    host_methods = methods + ["cgrt_device_launch", "launch_floor"]
    host_plot(host_methods, "p50", max, "host time per step p50 (us), worst context",
              "host time per step (perf_counter around the host part), all timed steps", "host_time.png")
    host_plot(host_methods, "p99", max, "host time per step p99 (us), worst context",
              "host time per step p99, all timed steps", "host_time_p99.png")
    host_plot(host_methods, "best_round_p50", max,
              "quietest round's host p50 (us), worst context",
              "host time per step, the quietest of each point's rounds", "host_time_quietest.png")
    return files


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(
        ROOT, "bench", "results", "model_decode_" + datetime.date.today().isoformat()))
    p.add_argument("--smoke", action="store_true", help="reduced model and sizes (the emulation, or a quick GPU check)")
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--driver", default=None)
    p.add_argument("--batches", default=None, help="comma list (default 1,8,32,128)")
    p.add_argument("--contexts", default=None, help="comma list (default 1024,8192,32768)")
    p.add_argument("--iters", type=int, default=300, help="timed steps per graph method and point")
    p.add_argument("--rounds", type=int, default=4, help="interleaved rounds the steps are split into")
    p.add_argument("--eager-iters", type=int, default=6)
    p.add_argument("--point-seconds", type=float, default=None,
                   help="optional cap: timed seconds per method and point (quick runs; default none)")
    p.add_argument("--profile-kernels", action="store_true",
                   help="per point, the GPU kernels of each method's step (torch.profiler): pt.kernel_profile")
    p.add_argument("--no-spec", action="store_true", help="skip the speculative-decoding part (quick runs)")
    p.add_argument("--spec-batches", default=None, help="default 1,8,32")
    p.add_argument("--spec-iters", type=int, default=10)
    p.add_argument("--spec-ks", default=None, help="draft counts k (default 1,2,3,4)")
    p.add_argument("--spec-context", type=int, default=None, help="context of the spec part (default 1024)")
    p.add_argument("--alpha", type=float, default=0.7, help="forced acceptance rate of the spec part's forced runs")
    p.add_argument("--spec-seconds", type=float, default=70.0,
                   help="seconds kept for the spec part: the decode points stop at deadline minus this "
                        "(none with --no-spec)")
    p.add_argument("--peers", default=os.path.join(ROOT, ".peers"), help="prebuilt peers (bench/peers/mla_peers.py)")
    p.add_argument("--no-peer", action="store_true", help="skip the torch_graph_peer method")
    p.add_argument("--no-device-launch", dest="device_launch", action="store_false",
                   help="skip the cgrt_device_launch method (a second, device-launched decode set)")
    p.add_argument("--kv-reserve-gib", type=float, default=14.0, help="device memory left free beside the KV caches")
    common.add_patch_arg(p)
    common.add_vproj_arg(p)
    p.add_argument("--pdl", type=int, choices=(0, 1, 2), default=2,
                   help="the MLA plans' programmatic_launch (default 2: the split reads seq_lens and the block "
                        "table while the RoPE + KV-write kernel before it runs)")
    p.add_argument("--deadline", type=float, default=450.0, help="seconds; later points are skipped")
    p.add_argument("--pin-cpu", type=int, default=None,
                   help="run the process on this one core (sched_setaffinity; recorded in config.pin_cpu): "
                        "whether the host time's slow rounds follow the core (round_host)")
    p.add_argument("--wait", choices=("poll", "sleep-poll"), default="poll",
                   help="how the host waits for a timed step: spin on an event query for all of it (default), "
                        "or sleep through 80%% of the previous step's latency, then spin")
    args = p.parse_args(argv)
    global WAIT
    WAIT = args.wait
    if args.pin_cpu is not None:
        # before the backend and torch start their threads, which inherit the mask
        try:
            os.sched_setaffinity(0, {args.pin_cpu})
        except (OSError, ValueError) as e:
            p.error(f"--pin-cpu {args.pin_cpu}: {e} (cores allowed: {sorted(os.sched_getaffinity(0))})")
    deadline = common.T0 + args.deadline
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    args.batches = ints(args.batches or ("1,4" if args.smoke else "1,8,32,128"))
    args.contexts = ints(args.contexts or ("64,200" if args.smoke else "1024,8192,32768"))
    args.spec_batches = ints(args.spec_batches or ("1,2" if args.smoke else "1,8,32"))
    args.spec_ks = ints(args.spec_ks or ("1,2" if args.smoke else "1,2,3,4"))
    args.spec_context = args.spec_context or (64 if args.smoke else 1024)
    if args.smoke:
        args.iters, args.eager_iters, args.spec_iters = min(args.iters, 4), min(args.eager_iters, 2), min(args.spec_iters, 2)
    os.makedirs(args.out, exist_ok=True)

    be = cg.Backend(driver=args.driver)
    cfg = REDUCED if (args.smoke or be.emulated) else FULL
    if args.layers:
        cfg = with_layers(cfg, args.layers)
    S = max(args.batches)
    Ss = max(args.spec_batches)
    k = max(args.spec_ks)
    max_model_len = max(args.contexts) + (args.spec_iters + 2) * (k + 1) + 64
    pps = pages_for(max_model_len, cfg.page_size)
    num_pages = S * pps
    cache_bytes = (num_pages + 1) * cfg.page_size * cfg.latent * 2
    distinct = cfg.layers
    stream, in_stream = common.run_stream(be)
    out = {"benchmark": "model_decode", "meta": gpu_meta(be), "what": __doc__, "config": {
        "model": cfg.__dict__, "max_num_seqs": S, "spec_max_num_seqs": Ss, "k_max": k, "spec_ks": args.spec_ks, "max_model_len": max_model_len,
        "batches": args.batches, "contexts": args.contexts, "pages_per_request": pps, "num_pages": num_pages,
        "wait": args.wait, "rounds": args.rounds, "iters": args.iters, "pin_cpu": args.pin_cpu,
        "affinity": sorted(os.sched_getaffinity(0)),
        "deviations": "dense MLP (intermediate 10944) in place of the MoE; plain RoPE; random weights; "
                      "synthetic prompt KV; the drafter's W_proj starts as [I; 0]"}, "spec": {}}
    say(f"bench: {cfg.layers} layers, batches {args.batches}, contexts {args.contexts}, out {args.out}")
    with in_stream:
        if not be.emulated:
            free = torch.cuda.mem_get_info()[0]
            weights = weight_bytes(cfg, drafter=True)
            budget = free - weights - args.kv_reserve_gib * 2**30
            fit = int(budget // cache_bytes) - 1  # one cache for the drafter
            distinct = max(1, min(cfg.layers, fit))
            say(f"KV: {cache_bytes / 1e9:.2f} GB per cache ({num_pages} pages); {free / 2**30:.1f} GiB free -> "
                f"{distinct} distinct target caches for {cfg.layers} layers" +
                ("" if distinct == cfg.layers else f" (layer l uses cache l mod {distinct})") + " + 1 drafter cache")
        out["config"]["kv_distinct_caches"] = distinct
        out["config"]["kv_note"] = (f"{distinct} distinct per-layer KV caches of {cache_bytes} bytes for "
                                    f"{cfg.layers} layers; layer l uses cache l mod {distinct}")
        eng = Engine(be, cfg, S, max_model_len, num_pages, spec_k=k, spec_seqs=Ss, kv_distinct=distinct,
                     log_width=args.spec_iters * (k + 1) + 4, stream=stream, progress=say,
                     decode_sizes=vllm_capture_sizes(S), device_patch=not args.host_patch, vproj=bool(args.vproj),
                     pdl=args.pdl)
        out["config"]["vproj"] = eng.vproj
        out["config"]["mla_programmatic_launch"] = eng.pdl
        out["config"]["fusions"] = {"path": fused.FUSED, "why_not_triton": fused.WHY or None}
        gen = torch.Generator(device=be.device)
        gen.manual_seed(11)
        t0 = time.perf_counter()
        eng.kv.fill_all(gen, cfg.kv_init_std)
        eng.draft_kv.fill_all(gen, cfg.kv_init_std)
        perm = torch.randperm(num_pages, generator=torch.Generator().manual_seed(5)).to(torch.int32)
        bt_host = perm.view(S, pps)
        eng.bench_bt = bt_host.to(be.device)
        bt_static = eng.bench_bt.clone()
        be.synchronize()
        say(f"KV caches filled with random latents in {time.perf_counter() - t0:.1f} s")
        pi, dpi = eng.plan.info, eng.dplan.info
        out["workspace"] = {
            "target_plan": pi, "drafter_plan": dpi, "stats": be.workspace_stats(),
            "cgrt_partials_bytes": pi["workspace_bytes"], "fixed_split_formula_bytes": pi["fixed_split_bytes"],
            "note": "fixed split: fp32 [rows, heads, min(next_pow2(max_model_len // 512), 2 * SMs), 513] at "
                    "rows = max_num_seqs"}
        say(f"workspace: cgrt partials {pi['workspace_bytes'] / 2**20:.2f} MiB vs fixed split "
            f"{pi['fixed_split_bytes'] / 2**20:.2f} MiB ({pi['splits']} splits, {pi['split_kernel']})")

        # ---- capture: cgrt ----
        cap = capture_bench(be, eng, stream, bt_static)
        tg = cap.pop("_torch_graphs", None)
        out["capture"] = cap
        tgs = [tg] if tg is not None else []
        if not be.emulated:
            peer = None if args.no_peer else pick_peer(args.peers, out)
            if peer is not None:
                tp = TorchGraphs(eng, eng.decode_sizes, stream, name="torch_graph_peer",
                                 make_ex=lambda: PeerExec(be, peer, cfg.heads))
                tp.attention = f"{peer.name} {peer.version}"
                if not peer.plan_is_device_work:
                    tp.set_host_plan(peer, cfg.heads)
                out["attention"] = {"torch_graph_peer": f"{peer.name} {peer.version}", "cgrt_prepared": "cgrt",
                                    "torch_graph": "cgrt"}
                t0 = time.perf_counter()
                try:
                    tp.capture(bt_static)
                    out["capture"]["torch_graph_peer_seconds"] = time.perf_counter() - t0
                    tgs.append(tp)
                except Exception as e:  # noqa: BLE001 - recorded; the other methods run
                    torch.cuda.synchronize()
                    out["peers"]["capture_error"] = repr(e)[:1000]
                    say(f"torch_graph_peer: capture failed: {e!r}")
        out["nodes_per_step"] = nodes_per_step(eng, tgs, args.batches, bt_static)
        write(out, args.out)

        say("decode steps:")
        spec_keep = 0.0 if args.no_spec else args.spec_seconds
        to_profile = bench_points(args, be, eng, tgs, stream, bt_static, deadline - spec_keep, out)
        host_summary(out)
        if args.no_spec:
            out["spec"] = {"skipped": "--no-spec"}
        else:
            run_spec(args, be, eng, stream, deadline, out)
        profile_points(to_profile, out, args.out)
        be.synchronize()
        be.verify()
    out["elapsed_seconds"] = time.perf_counter() - common.T0
    out["table"] = table(out)
    write(out, args.out)
    files = plots(out, args.out)
    for line in out["table"]:
        print(line, flush=True)
    say(f"wrote {os.path.join(args.out, 'model_decode.json')} and {len(files)} plots in {out['elapsed_seconds']:.0f} s")
    be.close()
    return 0


def run_spec(args, be, eng, stream, deadline, out):
    say("speculative decoding:")
    try:
        bench_spec(args, be, eng, stream, deadline, out)
    except Exception as e:  # noqa: BLE001 - recorded; the decode figures stand
        out["spec"]["error"] = repr(e)
        say(f"  spec part failed: {e!r}")


if __name__ == "__main__":
    sys.exit(common.guarded_main("bench", main))
