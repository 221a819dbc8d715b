"""MLA decode (cgrt_mla.h) on torch tensors, CuPy/DLPack arrays, or host arrays on the
emulation."""
import ctypes
import math
import sys
from ctypes import byref, c_void_p

from . import _lib
from ._handle import Handle
from ._lib import lib
from ._options import defaults, enum_value, make_options
from ._streams import stream_ptr, torch_current_stream

__all__ = ["MlaPlan", "mla_decode", "COMBINE", "KV_DTYPE", "mla_defaults", "QK_DIM", "V_DIM"]

COMBINE = {"workspace": 0, "counters": 1, "auto": 2}
KV_DTYPE = {"bf16": 0, "fp8_e4m3": 1}  # cgrt_mla_kv_dtype
QK_DIM, V_DIM = 576, 512


def mla_defaults():
    """cgrt_mla_options_init's defaults as a dict."""
    return defaults(_lib.MlaOptions, "cgrt_mla_options_init")


class MlaPlan(Handle):
    """cgrt_mla_plan. Keyword options are those of cgrt_mla_options with the C defaults:
    max_num_seqs, heads and max_model_len (required), block_len, dcp_world_size,
    page_size, max_blocks_per_seq, combine ("workspace", "counters", "auto"), lane,
    programmatic_launch, causal (1: causal verify rows), kv_dtype ("bf16" or "fp8_e4m3": an
    e4m3 cache, passed to decode as uint8 bytes, e.g. torch's float8_e4m3fn cache
    ``.view(torch.uint8)``), kv_scale (its per-tensor dequantization scale) and v_head_dim
    (> 0: decode also applies the per-head value up-projection w_uv after the merge and
    writes out as [rows, q_heads, v_head_dim]). Create it during warm-up, before the
    workspace lock."""

    _kind = "mla plan"

    def __init__(self, runtime, **options):
        conv = {"combine": lambda v: enum_value(v, COMBINE, "combine"),
                "kv_dtype": lambda v: enum_value(v, KV_DTYPE, "kv_dtype")}
        opts = make_options(_lib.MlaOptions, "cgrt_mla_options_init", options, conv)
        out = c_void_p()
        lib.cgrt_mla_plan_create(runtime.handle, byref(opts), byref(out))
        self.runtime = runtime
        super().__init__(out.value, lib.cgrt_mla_plan_destroy, parent=runtime)
        self.options = {f: getattr(opts, f) for f, _ in _lib.MlaOptions._fields_ if f != "size"}
        self.block_len = opts.block_len
        self.page_size = opts.page_size
        self.kv_fp8 = opts.kv_dtype == KV_DTYPE["fp8_e4m3"]
        self.v_head_dim = opts.v_head_dim
        self.max_blocks_per_seq = opts.max_blocks_per_seq or -(-opts.max_model_len // opts.page_size)
        info = self.info()
        self.q_heads, self.max_rows = info["q_heads"], info["max_rows"]

    def info(self):
        """cgrt_mla_plan_info as a dict (kernel names as str)."""
        i = _lib.MlaPlanInfo(size=ctypes.sizeof(_lib.MlaPlanInfo))
        lib.cgrt_mla_plan_get_info(self.handle, byref(i))
        d = {f: getattr(i, f) for f, _ in _lib.MlaPlanInfo._fields_ if f != "size"}
        for k in ("split_kernel", "one_row_kernel"):
            d[k] = d[k].decode() if d[k] else None
        return d

    def decode(self, q, kv_cache, block_table, seq_lens, out, lse, softmax_scale, num_rows=None,
               stream=None, w_uv=None):
        mla_decode(self, q, kv_cache, block_table, seq_lens, out, lse, softmax_scale, num_rows, stream, w_uv)


def mla_decode(plan, q, kv_cache, block_table, seq_lens, out, lse, softmax_scale, num_rows=None,
               stream=None, w_uv=None):
    """Enqueues one MLA decode step (cgrt_mla_decode) after checking every tensor.

    q bf16 [>= num_rows, q_heads, 576]; kv_cache bf16 [pages, page_size, 576] (uint8 e4m3
    bytes for a plan of kv_dtype "fp8_e4m3");
    block_table int32 [>= num_rows / block_len, max_blocks_per_seq]; seq_lens int32
    [>= num_rows / block_len]; out bf16 [>= num_rows, q_heads, 512] (a plan with v_head_dim
    v: [>= num_rows, q_heads, v], and w_uv bf16 [q_heads, 512, v]); lse float32
    [>= num_rows, q_heads] (the first num_rows rows are used); all dense, q/kv_cache/out
    16-byte aligned, on the runtime's device (host arrays on the emulation). num_rows
    defaults to q.shape[0].

    stream: None means torch's current stream when torch is loaded and the runtime is on
    a GPU (so the call works inside ``torch.cuda.graph`` capture: it launches there and
    neither synchronizes nor allocates), else the legacy default stream. Call it once
    outside capture first (warm-up: the counter buffer is allocated then).
    Raises TypeError/ValueError before any launch, cgrt.Error from the C call.
    """
    if not isinstance(plan, MlaPlan):
        raise TypeError(f"plan: expected a cgrt.MlaPlan, got {type(plan).__name__}")
    rt = plan.runtime
    scale = float(softmax_scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"softmax_scale {softmax_scale!r}: must be finite and > 0")
    tq = rt.check_tensor(q, "q", dtype="bfloat16", align=16)
    if len(tq.shape) != 3:
        raise ValueError(f"q: shape {list(tq.shape)}, expected [num_rows, {plan.q_heads}, {QK_DIM}]")
    rows = tq.shape[0] if num_rows is None else int(num_rows)
    if not 1 <= rows <= plan.max_rows or rows % plan.block_len:
        raise ValueError(f"num_rows {rows}: must be in [1, {plan.max_rows}] and a multiple of "
                         f"block_len {plan.block_len}")
    reqs = rows // plan.block_len
    h = plan.q_heads
    rt.check_tensor(q, "q", dtype="bfloat16", shape=(None, h, QK_DIM), align=16)
    tkv = rt.check_tensor(kv_cache, "kv_cache", dtype="uint8" if plan.kv_fp8 else "bfloat16",
                          shape=(None, plan.page_size, QK_DIM),
                          align=16)
    tbt = rt.check_tensor(block_table, "block_table", dtype="int32",
                          shape=(None, plan.max_blocks_per_seq), align=4)
    tsl = rt.check_tensor(seq_lens, "seq_lens", dtype="int32", shape=(None,), align=4)
    vd = plan.v_head_dim
    tout = rt.check_tensor(out, "out", dtype="bfloat16", shape=(None, h, vd or V_DIM), align=16)
    if vd:
        if w_uv is None:
            raise ValueError(f"w_uv: the plan projects to v_head_dim {vd}; pass w_uv [{h}, {V_DIM}, {vd}]")
        w_ptr = rt.check_tensor(w_uv, "w_uv", dtype="bfloat16", shape=(h, V_DIM, vd), align=16).ptr
    elif w_uv is not None:
        raise ValueError("w_uv: the plan has no v_head_dim (create it with v_head_dim=... to project)")
    else:
        w_ptr = 0
    tlse = rt.check_tensor(lse, "lse", dtype="float32", shape=(None, h), align=4)
    for t, what in ((tq, "q"), (tout, "out"), (tlse, "lse")):
        if t.shape[0] < rows:
            raise ValueError(f"{what}: {t.shape[0]} rows for num_rows {rows}")
    if tbt.shape[0] < reqs:
        raise ValueError(f"block_table: {tbt.shape[0]} rows for {reqs} requests")
    if tsl.shape[0] < reqs:
        raise ValueError(f"seq_lens: {tsl.shape[0]} entries for {reqs} requests")
    if stream is None and not rt.emulated and "torch" in sys.modules:
        s = torch_current_stream(rt.device_ordinal)
    else:
        s = stream_ptr(stream)
    args = _lib.MlaArgs(size=ctypes.sizeof(_lib.MlaArgs), q=tq.ptr, kv_cache=tkv.ptr, block_table=tbt.ptr,
                        seq_lens=tsl.ptr, out=tout.ptr, lse=tlse.ptr, num_rows=rows, softmax_scale=scale,
                        w_uv=w_ptr)
    lib.cgrt_mla_decode(plan.handle, s, byref(args))
