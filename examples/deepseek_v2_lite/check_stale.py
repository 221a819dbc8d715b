"""Checked replay refuses a step whose graph points into freed memory.

    python3 examples/deepseek_v2_lite/check_stale.py           # GPU (2 layers of the full shape)
    CGRT_DRIVER=emulated python3 examples/deepseek_v2_lite/check_stale.py

The model's KV caches, activations and the decode set's static buffers are registered
with cgrt (live ranges known to the buffer registry) and the decode set captures with
checked replay. On a GPU the rest of PyTorch's device memory that torch's kernels read
(weights, rope tables, the private pool's activations) is registered after the capture,
segment by segment of PyTorch's caching allocator less the ranges registered on their
own (Backend.register_torch_segments): without it checked replay refuses the first
torch kernel that reads a weight. A checked step runs. Then the engine drops the KV cache of layer 0: it
unregisters it, frees it and allocates tensors of the same size until one is served from
the freed block (the same addresses, as in an engine; PyTorch's caching allocator hands it
out at once; at most 16 allocations, else the case FAILS: it cannot be made). The
next step must fail with CGRT_ERROR_STALE_POINTER and launch nothing: the output buffer
keeps a sentinel, the set's replay count does not move. Where libcgrt has
cgrt_mem_register (device memory API), a second case frees the cache of layer 1 WITHOUT
unregistering it and returns its memory to the driver (torch.cuda.empty_cache()) before
allocating tensors of the same size until the driver hands the freed address out again
(at most 16, else the case FAILS): the driver's buffer id of the reused address differs
from the registered one, which checked replay must also refuse (GPU only: the emulation
reports no buffer ids for host memory). On the emulation the host's allocator places the
CPU tensors and may never serve the freed address again: the first case then says so and
checks the refusal of the unregistered range alone.

In the first case the freed memory stays mapped (the caching allocator keeps it), so a
step that is wrongly not refused writes into the new tensor instead of faulting: the
case reports FAILED and the second still runs. In the second, such a step may touch
memory returned to the driver; the CUDA error then surfaces at the next synchronization
and is reported with the case named.

The step's input tensors are registered too (on the emulation, host memory a checked
step binds must be known to cgrt). A failure of any kind ends the script with its full
text (the traceback, then the message's first lines again without PyTorch's C++ stack)
and a last line "check_stale: FAILED during <stage>: ..."; exit status 1 when a case is
not refused, 2 on an exception.
"""
import argparse
import gc
import math
import sys

import torch

import backend as cg
import common
from common import say, stage
from engine import Engine, pages_for


def _inputs(eng, n, ctx):
    """n requests of context ctx on consecutive pages, with synthetic KV; the tensors are
    registered with cgrt (checked replay accepts a bound address only inside memory it
    knows: on the emulation host memory is known once registered)."""
    cfg, dev = eng.cfg, eng.be.device
    per = pages_for(ctx + 1, cfg.page_size)
    bt = torch.zeros((eng.S, eng.MB), dtype=torch.int32)
    for i in range(n):
        bt[i, :per] = torch.arange(i * per, (i + 1) * per, dtype=torch.int32)
    g = torch.Generator(device=dev)
    g.manual_seed(5)
    eng.kv.fill_pages(list(range(n * per)), g, 1.0)
    inputs = {"token_ids": torch.arange(eng.S, dtype=torch.int64).to(dev),
              "req_seq_lens": torch.full((eng.S,), ctx + 1, dtype=torch.int32).to(dev),
              "req_positions": torch.full((eng.S,), ctx, dtype=torch.int64).to(dev),
              "block_table": bt.to(dev)}
    for k, t in inputs.items():
        eng.be.register(t, f"step input {k}")
    return inputs


def _refused(eng, inputs, n, what):
    """Steps once expecting STALE_POINTER with nothing launched; returns a result dict.
    A CUDA error after the step (it ran on freed memory) is raised with the case named."""
    be, out = eng.be, eng.dec["out_tokens"]
    stage(f"case '{what}': before the step")
    out.fill_(-7)
    be.synchronize()
    replays = eng.decode_set.stats()["replays"]
    status, msg = "CGRT_SUCCESS", ""
    stage(f"case '{what}': the step (expected to be refused)")
    try:
        eng.decode_set.step(n, bind=inputs)
    except cg.Error as e:
        status, msg = e.status_name, e.message
    stage(f"case '{what}': synchronizing after the step ({status})")
    try:
        be.synchronize()
    except Exception as e:  # noqa: BLE001 - named, then reported by the caller
        raise RuntimeError(f"case '{what}': the step returned {status} and the device failed afterwards "
                           f"(did a replay run on freed memory?): {type(e).__name__}") from e
    untouched = bool((out == -7).all())
    moved = eng.decode_set.stats()["replays"] - replays
    ok = status == "CGRT_ERROR_STALE_POINTER" and untouched and moved == 0
    say(f"{what}: step -> {status} ({msg[:160]}); outputs untouched: {untouched}; replays +{moved}: "
        f"{'OK' if ok else 'FAILED'}")
    return {"case": what, "status": status, "message": msg, "outputs_untouched": untouched,
            "replays_added": moved, "ok": ok}


def _drop_cache(eng, layer, unregister, to_driver):
    """Frees the KV cache of `layer` (every reference the engine holds; unregistered from
    cgrt first when `unregister`, as an engine does before freeing) and returns its
    address and size. `to_driver`: on a GPU the memory goes back to the driver
    (torch.cuda.empty_cache()); else PyTorch's caching allocator keeps it."""
    c = eng.kv.caches[layer]
    base, size = c.data_ptr(), c.numel() * c.element_size()
    stage(f"freeing the layer-{layer} KV cache")
    if eng.be.device.type == "cuda":
        torch.cuda.synchronize()  # nothing queued may still use it
    if unregister:
        eng.be.unregister(base)
    eng.kv.caches[layer] = None
    eng.kv.layer_cache = [None if t is c else t for t in eng.kv.layer_cache]
    del c
    gc.collect()
    if eng.be.device.type == "cuda" and to_driver:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return base, size


REUSE_TRIES = 16


def _reallocate_at(base, size, device):
    """Allocates tensors of `size` bytes until one starts at `base` (the freed address
    handed out again), holding the misses meanwhile so that they do not come back; at most
    REUSE_TRIES. Returns (the tensor at base or None, allocations made)."""
    misses = []
    for i in range(REUSE_TRIES):
        t = torch.empty(size, dtype=torch.uint8, device=device)
        if t.data_ptr() == base:
            del misses
            return t, i + 1
        misses.append(t)
    del misses
    return None, REUSE_TRIES


def _never_reused(what, base, size):
    """The result of a case that could not be made: the freed address never came back."""
    msg = (f"the freed address 0x{base:x} was never handed out again in {REUSE_TRIES} allocations of {size} "
           f"bytes: the case tests a reused address and cannot be made")
    say(f"{what}: {msg}: FAILED")
    return {"case": what, "status": "address never reused", "message": msg, "outputs_untouched": None,
            "replays_added": None, "same_address": False, "ok": False}


def cache_pages(cfg, at_least):
    """Pages such that a cache ([pages + 1, page, 576] bf16) is a whole number of 2 MiB and
    at least 16 MiB: PyTorch's allocator then gives it a segment of its own, which
    torch.cuda.empty_cache() returns to the driver once the cache is freed."""
    per_page = cfg.page_size * cfg.latent * 2
    m = (2 << 20) // math.gcd(per_page, 2 << 20)
    total = m
    while total - 1 < at_least or total * per_page < (16 << 20):
        total += m
    return total - 1


def run(be, cfg, n=3, ctx=100):
    """Returns (ok, results)."""
    S = 8
    stage("building the engine")
    eng = Engine(be, cfg, S, ctx + 64, cache_pages(cfg, pages_for(S * (ctx + 64), cfg.page_size)), checked=True,
                 progress=say)
    stage("capturing the decode set (checked replay)")
    eng.capture_decode()
    stage("preparing the inputs")
    inputs = _inputs(eng, n, ctx)
    # after the capture and the registrations of the caches and inputs (a registration may
    # not overlap another): the weights and the private pool's memory, as an engine would
    pieces = be.register_torch_segments()
    if pieces:
        say(f"registered the rest of PyTorch's device memory: {pieces} pieces of its allocator's segments")
    stage("a checked step with every range live")
    eng.decode_set.step(n, bind=inputs)
    be.synchronize()
    say(f"checked step with every range live: OK ({eng.decode_set.stats()['replays']} replays)")
    results = []

    what = "freed and unregistered"
    base, size = _drop_cache(eng, 0, unregister=True, to_driver=False)
    stage("allocating tensors of the freed size until the freed address comes back")
    filler, tries = _reallocate_at(base, size, be.device)
    if filler is not None:
        say(f"layer-0 KV cache unregistered and freed; a new {size}-byte tensor got the same address "
            f"(allocation {tries})")
        r = _refused(eng, inputs, n, what)
        r["same_address"] = True
    elif be.emulated:
        # The host's allocator places CPU tensors (glibc may serve the size elsewhere): the
        # refusal does not depend on the address (the range is unregistered); said so.
        filler = torch.empty(size, dtype=torch.uint8, device=be.device)
        say(f"layer-0 KV cache unregistered and freed; the emulation's host allocator did not hand its address "
            f"out again in {REUSE_TRIES} allocations: the case checks the refusal of the unregistered range only")
        r = _refused(eng, inputs, n, what)
        r["same_address"] = False
    else:
        # PyTorch's caching allocator keeps the freed block: it must come back.
        r = _never_reused(what, base, size)
    results.append(r)

    if be.has_mem_register and not be.emulated and cfg.layers > 1:
        what1 = "freed, reallocated, still registered"
        base1, size1 = _drop_cache(eng, 1, unregister=False, to_driver=True)
        stage("allocating tensors of the freed size (layer 1) until the freed address comes back")
        filler1, tries1 = _reallocate_at(base1, size1, be.device)
        if filler1 is None:
            results.append(_never_reused(what1, base1, size1))
        else:
            say(f"layer-1 KV cache freed without unregistering, its memory returned to the driver; a new tensor got "
                f"the same address (allocation {tries1}), under another buffer id")
            r = _refused(eng, inputs, n, what1)
            r["same_address"] = True
            results.append(r)
        del filler1
    del filler
    stage("done")
    return all(r["ok"] for r in results), results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    args = p.parse_args(argv)
    if args.layers is None:
        args.layers = 2
    stage("opening the backend")
    be, cfg = common.open_backend(args)
    try:
        ok, results = run(be, cfg)
    except Exception as e:  # noqa: BLE001 - in the JSON too, then reported by guarded_main
        common.write_json(args.json, {"meta": common.run_meta(be), "ok": False, "stage": common.STAGE[0],
                                      "exception": common.exception_head(e)})
        raise
    common.write_json(args.json, {"meta": common.run_meta(be), "results": results, "ok": ok})
    be.close()
    say("check_stale: OK" if ok else "check_stale: FAILED: " + "; ".join(
        f"{r['case']}: {r['status']}, outputs untouched {r['outputs_untouched']}, replays +{r['replays_added']}"
        for r in results if not r["ok"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(common.guarded_main("check_stale", main))
