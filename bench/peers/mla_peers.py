"""The peer MLA decode kernels cgrt is timed against, behind one adapter.

Peers (both sm90 / H100 / H200 only, bf16, page size 64, 576-wide latent KV, 512-wide V):

  "flashmla"        FlashMLA's sm90 dense decode (deepseek-ai/FlashMLA, pinned commit, built
                    by build_flashmla.sh into <peers_dir>/flashmla/flashmla_dense_sm90.so).
  "flashinfer_fa3"  FlashInfer's BatchMLAPagedAttentionWrapper, backend="fa3" (PyPI wheel
                    flashinfer-python 0.7.2; its MLA module is JIT-built once and loaded
                    from <peers_dir>/flashinfer-aot/<uri>/<uri>.so as an AOT module).

Layout of <peers_dir> (default ".peers" in the repository root; ignored, never committed):

  flashmla-src/                    FlashMLA sources (git archive subset) + CUTLASS headers (tar.xz)
  flashmla/flashmla_dense_sm90.so  built extension (torch 2.11 / Python 3.12 ABI of the GPU machine)
  flashmla/BUILD_INFO.json         commit, torch, nvcc, build time
  whl/flashinfer_python-0.7.2-pruned.tar.xz   the wheel's files, unused CUDA sources dropped
  whl/apache_tvm_ffi-*.whl         FlashInfer's one compiled dependency missing on the GPU machine
  flashinfer-aot/<uri>/<uri>.so    FlashInfer's JIT-built fa3 MLA module
  tvm-ffi-cache/                   tvm-ffi's torch DLPack addon, if tvm-ffi had to build one

API (kept stable; other benchmarks code against it):

  load(peers_dir=".peers") -> dict     name -> Peer, or name -> str reason; never raises
  Peer.name, Peer.version
  Peer.plan(block_table, seq_lens, heads, s_q, causal, softmax_scale=None) -> None
  Peer.run(q, kv_cache, block_table, seq_lens, softmax_scale, causal, out=None, return_lse=False)
  Peer.reset()                         drops all plans (and FlashInfer's wrappers)
  check(peers=None, peers_dir=".peers") -> dict   name -> {"max_abs_err", "max_lse_err", ...}

Tensors (all on one sm90 GPU):
  q            [batch, s_q, heads, 576] bf16 (contiguous)
  kv_cache     [num_pages, 64, 576] bf16 (page size 64; V is the first 512 values)
  block_table  [batch, max_pages] int32
  seq_lens     [batch] int32: KV length seen by the LAST query row of each request;
               with causal, row i of s_q sees seq_len - (s_q - 1 - i) tokens (both peers
               and cgrt use this bottom-right alignment)
  out          [batch, s_q, heads, 512] bf16; lse [batch, s_q, heads] fp32, natural log

plan() is per-step metadata for one batch and must precede run() with the same
block_table / seq_lens tensors (same storage, same shapes, heads, s_q, causal):
  flashmla:        device work (FlashMLA's get_mla_metadata kernel into tensors owned by the
                   Peer), graph-capturable; it reads seq_lens only. Re-planning writes the
                   same tensors in place, so graphs captured earlier see the new metadata.
  flashinfer_fa3:  host work (wrapper.plan: copies seq_lens to the host, schedules, stages
                   metadata into reserved buffers); never inside a graph capture. One wrapper
                   per (block_table storage, shapes, heads, s_q, causal), kept alive by the
                   Peer so graphs captured after its plan stay valid.
run() is capturable in torch.cuda.graph once plan() ran outside the capture. Both peers
compute the LSE in every call (so does cgrt); return_lse=True returns (out, lse).
flashmla allocates its output (and split partials) per call; out= then costs one extra copy.
flashinfer_fa3 writes out= directly.

The module imports without torch; load() returns reasons instead of raising. Command line
(on the GPU machine): python3 mla_peers.py check | build-flashinfer --out DIR.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import json
import math
import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

NAMES = ("flashmla", "flashinfer_fa3")
PAGE = 64
D_QK = 576
D_V = 512
FLASHINFER_VERSION = "0.7.2"
FLASHINFER_TARBALL = f"flashinfer_python-{FLASHINFER_VERSION}-pruned.tar.xz"
FLASHMLA_MODULE = "flashmla_dense_sm90"

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _peers_path(peers_dir: Union[str, os.PathLike]) -> Path:
    """peers_dir as given if it exists, else the same name under the repository root."""
    p = Path(peers_dir)
    if p.exists() or p.is_absolute():
        return p.resolve()
    alt = _REPO_ROOT / p
    return alt.resolve() if alt.exists() else p.resolve()


class Peer:
    """One peer MLA decode kernel. See the module docstring for the tensor contract."""

    name: str = ""
    version: str = ""
    plan_is_device_work: bool = False

    def plan(self, block_table, seq_lens, heads: int, s_q: int, causal: bool,
             softmax_scale: Optional[float] = None) -> None:
        raise NotImplementedError

    def run(self, q, kv_cache, block_table, seq_lens, softmax_scale: float, causal: bool,
            out=None, return_lse: bool = False):
        raise NotImplementedError

    def reset(self) -> None:
        """Drops every plan (graphs captured after them must be gone first)."""
        self._plans.clear()

    def __repr__(self) -> str:
        return f"<Peer {self.name} {self.version}>"


# --------------------------------------------------------------------------- FlashMLA


class FlashMLAPeer(Peer):
    """FlashMLA sm90 dense decode (bf16) through flashmla_dense_sm90.so."""

    name = "flashmla"
    plan_is_device_work = True

    def __init__(self, mod: Any, version: str) -> None:
        self._mod = mod
        self.version = version
        self._plans: Dict[Tuple, Tuple[Any, Any]] = {}

    @staticmethod
    def _key(seq_lens, heads: int, s_q: int) -> Tuple:
        return (seq_lens.data_ptr(), int(seq_lens.shape[0]), int(heads), int(s_q))

    def plan(self, block_table, seq_lens, heads: int, s_q: int, causal: bool,
             softmax_scale: Optional[float] = None) -> None:
        """Runs FlashMLA's scheduler kernel (get_mla_metadata) on the current stream.

        Device work, no host sync, graph-capturable; the metadata tensors are allocated
        at the first plan of a (seq_lens storage, batch, heads, s_q) and reused after."""
        import torch

        key = self._key(seq_lens, heads, s_q)
        meta = self._plans.get(key)
        if meta is None:
            parts, ints = self._mod.dense_decode_sched_meta_shape(int(s_q), int(heads), 1)
            meta = (torch.empty((parts, ints), dtype=torch.int32, device=seq_lens.device),
                    torch.empty((int(seq_lens.shape[0]) + 1,), dtype=torch.int32, device=seq_lens.device))
            self._plans[key] = meta
        self._mod.dense_decode_sched_meta(seq_lens, int(s_q), int(heads), 1, meta[0], meta[1])

    def run(self, q, kv_cache, block_table, seq_lens, softmax_scale: float, causal: bool,
            out=None, return_lse: bool = False):
        key = self._key(seq_lens, q.shape[2], q.shape[1])
        meta = self._plans.get(key)
        if meta is None:
            raise RuntimeError("flashmla: run() before plan() for these seq_lens / heads / s_q")
        kv4 = kv_cache.unsqueeze(2)  # [num_pages, 64, 1 (kv heads), 576]
        o, lse, _, _ = self._mod.dense_decode_fwd(q, kv4, D_V, seq_lens, block_table, float(softmax_scale),
                                                  bool(causal), meta[0], meta[1])
        if out is not None:
            out.copy_(o)
            o = out
        if return_lse:
            return o, lse.transpose(1, 2)  # [batch, heads, s_q] -> [batch, s_q, heads]
        return o


def _load_flashmla(peers: Path) -> FlashMLAPeer:
    so = peers / "flashmla" / f"{FLASHMLA_MODULE}.so"
    if not so.exists():
        raise FileNotFoundError(f"{so} not built (bench/peers/build_flashmla.sh {peers}/flashmla-src {peers}/flashmla)")
    import torch  # noqa: F401  (loads libtorch / libc10 for the extension)

    spec = importlib.util.spec_from_file_location(FLASHMLA_MODULE, str(so))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {so}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    version = "unknown"
    info = peers / "flashmla" / "BUILD_INFO.json"
    if info.exists():
        d = json.loads(info.read_text())
        version = f"FlashMLA {d.get('flashmla_commit', '?')[:12]} (sm90 dense, torch {d.get('torch', '?')})"
    return FlashMLAPeer(mod, version)


# --------------------------------------------------------------------------- FlashInfer


def _flashinfer_uri() -> str:
    import torch
    from flashinfer.jit.attention.modules import get_batch_mla_uri

    return get_batch_mla_uri("fa3", torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, D_V, D_QK - D_V,
                             False)


def _get_batch_mla_module():
    """FlashInfer's cached module getter (the one the wrapper's fa3 backend calls)."""
    try:
        from flashinfer.mla._batch_mla._backends._fa_common import get_batch_mla_module
    except ImportError:
        from flashinfer.mla import get_batch_mla_module
    return get_batch_mla_module


def _ensure_flashinfer_importable(peers: Path) -> str:
    """Makes `import flashinfer` work: preinstalled, or unpacked from <peers>/whl into a site
    folder ($PEERS_SITE, default /tmp/peers-site) put first on sys.path. Returns where from."""
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", "/tmp/peers-flashinfer-ws")
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "9.0a")
    tvm_cache = Path(os.environ.setdefault("TVM_FFI_CACHE_DIR", "/tmp/peers-tvm-ffi-cache"))
    carried = peers / "tvm-ffi-cache"
    if carried.is_dir():
        tvm_cache.mkdir(parents=True, exist_ok=True)
        for f in carried.iterdir():
            if f.is_file() and not (tvm_cache / f.name).exists():
                shutil.copy2(f, tvm_cache / f.name)
    if importlib.util.find_spec("flashinfer") is not None:
        return "preinstalled"
    site = Path(os.environ.get("PEERS_SITE", "/tmp/peers-site"))
    marker = site / f".peers-flashinfer-{FLASHINFER_VERSION}"
    if not marker.exists():
        tarball = peers / "whl" / FLASHINFER_TARBALL
        wheels = sorted(glob.glob(str(peers / "whl" / "apache_tvm_ffi-*.whl")))
        if not tarball.exists():
            raise FileNotFoundError(f"{tarball} missing (see bench/peers/README.md)")
        if not wheels:
            raise FileNotFoundError(f"{peers}/whl/apache_tvm_ffi-*.whl missing")
        site.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as t:
            t.extractall(site)
        for w in wheels:
            with zipfile.ZipFile(w) as z:
                z.extractall(site)
        for f in site.glob("*.data/scripts/*"):
            f.chmod(0o755)
        marker.write_text("unpacked by mla_peers\n")
    if str(site) not in sys.path:
        sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    return str(site)


class FlashInferFa3Peer(Peer):
    """FlashInfer BatchMLAPagedAttentionWrapper(backend="fa3"), packed q / KV, LSE base e."""

    name = "flashinfer_fa3"
    plan_is_device_work = False

    def __init__(self, version: str, workspace_mib: int = 512) -> None:
        self.version = version
        self._workspace_mib = workspace_mib
        self._workspace = None
        self._plans: Dict[Tuple, Any] = {}

    @staticmethod
    def _key(block_table, seq_lens, heads: int, s_q: int, causal: bool) -> Tuple:
        return (block_table.data_ptr(), tuple(block_table.shape), seq_lens.data_ptr(), int(seq_lens.shape[0]),
                int(heads), int(s_q), bool(causal))

    def plan(self, block_table, seq_lens, heads: int, s_q: int, causal: bool,
             softmax_scale: Optional[float] = None) -> None:
        """wrapper.plan on CSR metadata built from block_table / seq_lens. Host work (a
        device-to-host copy of seq_lens and FlashInfer's scheduler); not capturable."""
        import torch
        from flashinfer.mla import BatchMLAPagedAttentionWrapper, MLAPlanMetadata

        dev = block_table.device
        batch, max_pages = int(block_table.shape[0]), int(block_table.shape[1])
        if self._workspace is None:
            self._workspace = torch.empty(self._workspace_mib << 20, dtype=torch.uint8, device=dev)
        key = self._key(block_table, seq_lens, heads, s_q, causal)
        w = self._plans.get(key)
        if w is None:
            w = BatchMLAPagedAttentionWrapper(
                self._workspace,
                use_cuda_graph=True,
                qo_indptr=torch.empty(batch + 1, dtype=torch.int32, device=dev),
                kv_indptr=torch.empty(batch + 1, dtype=torch.int32, device=dev),
                kv_indices=torch.empty(batch * max_pages, dtype=torch.int32, device=dev),
                kv_len_arr=torch.empty(batch, dtype=torch.int32, device=dev),
                backend="fa3",
            )
            self._plans[key] = w
        lens = seq_lens.to(torch.int32)
        npages = (lens + (PAGE - 1)) // PAGE
        kv_indptr = torch.zeros(batch + 1, dtype=torch.int32, device=dev)
        kv_indptr[1:] = torch.cumsum(npages, 0)
        mask = torch.arange(max_pages, device=dev)[None, :] < npages[:, None]
        kv_indices = block_table[mask].to(torch.int32).contiguous()
        qo_indptr = torch.arange(batch + 1, dtype=torch.int32, device=dev) * int(s_q)
        w.plan(
            metadata=MLAPlanMetadata.csr(qo_indptr, kv_indptr, kv_indices, lens.contiguous()),
            num_heads=int(heads),
            head_dim_ckv=D_V,
            head_dim_kpe=D_QK - D_V,
            page_size=PAGE,
            causal=bool(causal),
            sm_scale=float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(D_QK),
            q_data_type=torch.bfloat16,
            kv_data_type=torch.bfloat16,
            lse_mode="basee",
        )

    def run(self, q, kv_cache, block_table, seq_lens, softmax_scale: float, causal: bool,
            out=None, return_lse: bool = False):
        import torch

        w = self._plans.get(self._key(block_table, seq_lens, q.shape[2], q.shape[1], causal))
        if w is None:
            raise RuntimeError("flashinfer_fa3: run() before plan() for this block_table / seq_lens / shape")
        pb = getattr(w, "_planned_backend", None)
        if pb is not None and hasattr(pb, "_sm_scale"):
            pb._sm_scale = float(softmax_scale)  # a kernel argument of the fa3 run, not plan state
        else:
            raise RuntimeError("flashinfer_fa3: this FlashInfer has no run-time softmax scale hook")
        batch, s_q, heads = int(q.shape[0]), int(q.shape[1]), int(q.shape[2])
        tokens = batch * s_q
        if out is None:
            out = torch.empty((batch, s_q, heads, D_V), dtype=q.dtype, device=q.device)
        lse = torch.empty((tokens, heads), dtype=torch.float32, device=q.device)
        w.run(query=q.reshape(tokens, heads, D_QK), kv_cache=kv_cache, out=out.view(tokens, heads, D_V), lse=lse,
              return_lse=True, return_lse_base_on_e=True)
        if return_lse:
            return out, lse.view(batch, s_q, heads)
        return out


def _load_flashinfer(peers: Path) -> FlashInferFa3Peer:
    where = _ensure_flashinfer_importable(peers)
    import torch
    import flashinfer
    import flashinfer.jit.env as fi_env

    aot = peers / "flashinfer-aot"
    if aot.is_dir():
        fi_env.FLASHINFER_AOT_DIR = aot  # read by get_aot_artifacts at each module lookup
    uri = _flashinfer_uri()
    prebuilt = (aot / uri / f"{uri}.so").exists()
    if not prebuilt and shutil.which("nvcc") is None:
        raise FileNotFoundError(f"FlashInfer MLA module {aot / uri}/{uri}.so not prebuilt and no nvcc to JIT it")
    if prebuilt:
        _get_batch_mla_module()("fa3", torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, D_V, D_QK - D_V,
                             False)
    ver = getattr(flashinfer, "__version__", "?")
    how = "prebuilt" if prebuilt else "JIT on first plan"
    return FlashInferFa3Peer(f"flashinfer-python {ver} fa3 ({how}, from {where})")


def build_flashinfer_module(peers_dir: str, out_dir: str) -> str:
    """JIT-builds FlashInfer's fa3 MLA module (bf16, 512 + 64) and copies it to
    out_dir/<uri>/<uri>.so, the layout load() reads from <peers_dir>/flashinfer-aot.
    Also copies tvm-ffi's torch addon, if one was built, to out_dir/../tvm-ffi-cache."""
    peers = _peers_path(peers_dir)
    _ensure_flashinfer_importable(peers)
    import torch
    from flashinfer.jit import gen_batch_mla_module

    spec = gen_batch_mla_module("fa3", torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.int32, D_V, D_QK - D_V,
                                False)
    spec.build_and_load()
    src = spec.jit_library_path
    dst = Path(out_dir) / spec.name / f"{spec.name}.so"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst)
    tvm_cache = Path(os.environ["TVM_FFI_CACHE_DIR"])
    addons = list(tvm_cache.glob("*.so")) if tvm_cache.is_dir() else []
    if addons:
        t = Path(out_dir).parent / "tvm-ffi-cache"
        t.mkdir(parents=True, exist_ok=True)
        for a in addons:
            shutil.copy2(a, t / a.name)
    return str(dst)


# --------------------------------------------------------------------------- load / check


def load(peers_dir: str = ".peers") -> dict:
    """name -> Peer for each usable peer, name -> reason (str) for each unusable one.
    Never raises."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        return {n: f"torch not importable: {e}" for n in NAMES}
    try:
        if not torch.cuda.is_available():
            return {n: "no CUDA device" for n in NAMES}
        cap = torch.cuda.get_device_capability()
        if cap != (9, 0):
            return {n: f"needs an sm90 GPU (H100/H200); this one is sm{cap[0]}{cap[1]}" for n in NAMES}
    except Exception as e:  # noqa: BLE001
        return {n: f"CUDA query failed: {e}" for n in NAMES}
    peers = _peers_path(peers_dir)
    res: Dict[str, Any] = {}
    for name, fn in (("flashmla", _load_flashmla), ("flashinfer_fa3", _load_flashinfer)):
        try:
            res[name] = fn(peers)
        except BaseException as e:  # noqa: BLE001  (a JIT failure can raise SystemExit)
            res[name] = f"{type(e).__name__}: {e}"
    return res


def reference(q, kv_cache, block_table, seq_lens, softmax_scale: float, causal: bool):
    """fp32 torch reference: (out [b, s_q, h, 512] fp32, lse [b, s_q, h] fp32, natural log)."""
    import torch

    b, s_q, h, _ = q.shape
    outs, lses = [], []
    for i in range(b):
        n = int(seq_lens[i])
        pages = block_table[i, : (n + PAGE - 1) // PAGE].long()
        k = kv_cache[pages].reshape(-1, D_QK)[:n].float()  # [n, 576]
        s = torch.einsum("qhd,nd->qhn", q[i].float(), k) * softmax_scale  # [s_q, h, n]
        if causal:
            seen = n - (s_q - 1 - torch.arange(s_q, device=q.device))  # row r sees this many
            mask = torch.arange(n, device=q.device)[None, :] >= seen[:, None]
            s = s.masked_fill(mask[:, None, :], float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.softmax(s, dim=-1)
        outs.append(torch.einsum("qhn,nd->qhd", p, k[:, :D_V]))
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


CHECK_CASES = (
    # batch, heads, s_q, causal, max context
    (3, 16, 1, False, 700),
    (2, 128, 1, False, 1000),
    (3, 16, 4, False, 600),
    (3, 16, 4, True, 600),
    (2, 64, 2, True, 900),
    (2, 32, 8, True, 300),
)


def check(peers: Optional[dict] = None, peers_dir: str = ".peers", seed: int = 0) -> dict:
    """Each available peer against the fp32 reference on CHECK_CASES (random data, random
    lengths not multiples of 64, shuffled pages), eager and replayed from a CUDA graph.
    Returns name -> {"max_abs_err", "max_lse_err", "graph_equal", "cases"} or name -> reason."""
    import torch

    if peers is None:
        peers = load(peers_dir)
    res: Dict[str, Any] = {}
    g = torch.Generator(device="cuda").manual_seed(seed)
    for name, peer in peers.items():
        if isinstance(peer, str):
            res[name] = peer
            continue
        cases = []
        try:
            for (b, h, s_q, causal, ctx) in CHECK_CASES:
                max_pages = (ctx + PAGE - 1) // PAGE
                num_pages = b * max_pages + 7
                kv = torch.randn((num_pages, PAGE, D_QK), generator=g, device="cuda").to(torch.bfloat16)
                q = torch.randn((b, s_q, h, D_QK), generator=g, device="cuda").to(torch.bfloat16)
                bt = torch.randperm(num_pages, generator=g, device="cuda")[: b * max_pages].view(b, max_pages)
                bt = bt.to(torch.int32).contiguous()
                lens = torch.randint(max(s_q, ctx // 3), ctx + 1, (b,), generator=g, device="cuda").to(torch.int32)
                lens[0] = ctx - 13
                scale = 1.0 / math.sqrt(D_QK)
                ref_o, ref_l = reference(q, kv, bt, lens, scale, causal)
                peer.plan(bt, lens, h, s_q, causal, softmax_scale=scale)
                o, l = peer.run(q, kv, bt, lens, scale, causal, return_lse=True)
                torch.cuda.synchronize()
                err = (o.float() - ref_o).abs().max().item()
                lerr = (l.float() - ref_l).abs().max().item()
                # The same call captured in a graph and replayed: identical to eager.
                out_g = torch.empty_like(o)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    og = peer.run(q, kv, bt, lens, scale, causal)
                graph.replay()
                torch.cuda.synchronize()
                out_g.copy_(og)
                same = bool(torch.equal(out_g, o))
                cases.append({"batch": b, "heads": h, "s_q": s_q, "causal": causal, "max_context": ctx,
                              "max_abs_err": err, "max_lse_err": lerr, "graph_equal": same})
                del graph
            res[name] = {
                "max_abs_err": max(c["max_abs_err"] for c in cases),
                "max_lse_err": max(c["max_lse_err"] for c in cases),
                "graph_equal": all(c["graph_equal"] for c in cases),
                "cases": cases,
            }
        except Exception as e:  # noqa: BLE001
            res[name] = {"error": f"{type(e).__name__}: {e}", "cases": cases}
    return res


def _main(argv) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="load the peers and compare them with the fp32 reference")
    c.add_argument("--peers-dir", default=".peers")
    c.add_argument("--json", default="")
    b = sub.add_parser("build-flashinfer", help="JIT-build FlashInfer's fa3 MLA module into --out")
    b.add_argument("--peers-dir", default=".peers")
    b.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "build-flashinfer":
        print(build_flashinfer_module(a.peers_dir, a.out))
        return 0
    peers = load(a.peers_dir)
    for n, p in peers.items():
        print(f"{n:15s} {p.version if isinstance(p, Peer) else 'MISSING: ' + p}")
    r = check(peers)
    for n, v in r.items():
        if isinstance(v, str):
            print(f"{n:15s} missing: {v}")
        elif "error" in v:
            print(f"{n:15s} ERROR {v['error']}")
            for cs in v["cases"]:
                print("   ", cs)
        else:
            for cs in v["cases"]:
                print(f"{n:15s} b {cs['batch']} h {cs['heads']:3d} s_q {cs['s_q']} causal {int(cs['causal'])} "
                      f"max|err| {cs['max_abs_err']:.3e} lse {cs['max_lse_err']:.3e} graph==eager {cs['graph_equal']}")
            print(f"{n:15s} MAX abs err {v['max_abs_err']:.3e}  lse err {v['max_lse_err']:.3e}  "
                  f"graph==eager {v['graph_equal']}")
    if a.json:
        Path(a.json).write_text(json.dumps({"versions": {n: (p.version if isinstance(p, Peer) else None)
                                                         for n, p in peers.items()}, "check": r}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
