"""Serve a randomized stream of decode requests with the DeepSeek-V2-Lite-shaped model
through cgrt graphs: warm-up (reserve, lock), capture of the bucket set, then replay with
rebinding; the first steps are checked against eager execution.

    python3 examples/deepseek_v2_lite/serve.py               # GPU: full model, 1000 steps
    CGRT_DRIVER=emulated python3 examples/deepseek_v2_lite/serve.py   # reduced, emulation

Each step the engine builds its inputs as new device tensors (token ids, request lengths
and positions; the block table alternates between two tensors) and binds them: no
copy into static buffers; cgrt patches the nodes that read them. Requests arrive at
random with ragged contexts (log-uniform up to --max-context; their prompt KV is random,
"synthetic prefill"), decode a random number of tokens and leave.

Check (the first --check-steps steps): the same step is run eagerly, through the same
PyTorch segments and cgrt MLA kernel at the same padded row count, on the same inputs;
the output tokens and final hidden states must be equal bit for bit. Every
--attn-check-every steps the last layer's attention output is also compared with an fp32
PyTorch reference over the paged cache (tolerance: |diff| <= 0.02 + 0.02 |ref|).
"""
import argparse
import math
import random
import sys
import time

import torch

import common
from common import say, stage
from engine import Engine, max_abs_diff, pages_for, summarize_ms, tensor_equal
from model import reference_mla


class Req:
    def __init__(self, rid, ctx, out_len, pages, token):
        self.rid, self.ctx, self.out_len, self.pages, self.token = rid, ctx, out_len, pages, token
        self.gen = 0

    @property
    def seq_len(self):  # tokens in the context including the one fed this step
        return self.ctx + self.gen + 1


def attention_check(eng, inputs, n, B):
    """Last layer: cgrt's MLA output (still in the activations after the eager step) against
    the fp32 reference over the paged cache. Returns the largest excess over tolerance and
    the largest absolute difference."""
    cfg, act = eng.cfg, eng.act
    kv = eng.kv.layer_cache[-1]
    out, _ = reference_mla(act.q[:n], kv, inputs["block_table"][:n], inputs["req_seq_lens"][:n],
                           cfg.softmax_scale, cfg.page_size)
    if eng.plan.for_rows(B).v_head_dim:  # MLA projected by W_UV (cgrt_mla_vproj): the reference latent, rounded
        # to bf16 as the kernels hand it over, projected the same way
        w = eng.weights.layers[-1]["w_uv_t"].float()
        out = torch.bmm(out.to(torch.bfloat16).float().transpose(0, 1), w).transpose(0, 1)
        got = act.o[:n].float()
    else:
        got = act.attn[:n].float()
    diff = (got - out).abs()
    excess = float((diff - (0.02 + 0.02 * out.abs())).max()) if n else -1.0
    return excess, float(diff.max()) if n else 0.0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    p.add_argument("--steps", type=int, default=None, help="decode steps (default 1000 GPU, 24 emulation)")
    p.add_argument("--max-num-seqs", type=int, default=None, help="default 64 GPU, 8 emulation")
    p.add_argument("--max-context", type=int, default=None, help="longest prompt (default 32768 GPU, 200 emu)")
    p.add_argument("--max-new", type=int, default=None, help="most tokens a request decodes (default 256 / 12)")
    p.add_argument("--kv-tokens", type=int, default=None, help="KV cache capacity in tokens (default 1M / 4096)")
    p.add_argument("--check-steps", type=int, default=None, help="steps checked against eager (default: all)")
    p.add_argument("--attn-check-every", type=int, default=50)
    p.add_argument("--checked-replay", action="store_true", help="cgrt's checked replay (slower)")
    p.add_argument("--device-launch", action="store_true",
                   help="a device-launched decode set (options.device_launch): the step is triggered through "
                        "pinned memory and ordered with no stream, so the loop synchronizes the input copies "
                        "before it and waits with synchronize() after it")
    args = p.parse_args(argv)

    stage("opening the backend")
    be, cfg = common.open_backend(args)
    emu = be.emulated
    steps = args.steps or (24 if emu else 1000)
    S = args.max_num_seqs or (8 if emu else 64)
    max_ctx = args.max_context or (200 if emu else 32768)
    max_new = args.max_new or (12 if emu else 256)
    kv_tokens = args.kv_tokens or (4096 if emu else 1 << 20)
    check_steps = steps if args.check_steps is None else args.check_steps
    max_model_len = max_ctx + max_new + 1
    num_pages = pages_for(kv_tokens, cfg.page_size)
    rng = random.Random(args.seed)
    stream, in_stream = common.run_stream(be)
    summary = {"meta": common.run_meta(be), "config": vars(args) | {"steps": steps, "max_num_seqs": S,
               "max_context": max_ctx, "max_new": max_new, "kv_tokens": kv_tokens, "model": cfg.__dict__}}
    failures = []
    with in_stream:
        stage("building the engine (weights, KV caches, warm-up, lock)")
        eng = Engine(be, cfg, S, max_model_len, num_pages, checked=args.checked_replay, stream=stream, progress=say,
                     device_patch=not args.host_patch, vproj=bool(args.vproj))
        ws = be.workspace_stats()
        pi = eng.plan.info
        say(f"warm-up: workspaces locked ({ws['reservations']} reservations, {ws['bytes_allocated'] / 2**20:.2f} MiB,"
            f" counters {ws['counter_bytes']} B); MLA plan {pi['split_kernel']}, {pi['splits']} splits, partials "
            f"{pi['workspace_bytes'] / 2**20:.2f} MiB (fixed split: {pi['fixed_split_bytes'] / 2**20:.2f} MiB)")
        stage("capturing the decode set")
        secs = eng.capture_decode(**({"device_launch": 1} if args.device_launch else {}))
        gs = eng.decode_set.stats()
        say(f"captured {gs['buckets']} buckets {eng.decode_sizes} in {secs:.2f} s ({gs['nodes']} nodes, "
            f"graph memory {gs['graph_memory_bytes'] / 2**20:.1f} MiB)")
        summary["capture"] = {"seconds": secs, "sizes": eng.decode_sizes, "stats": gs,
                              "buckets": eng.decode_set.buckets(), "workspace": ws, "plan": pi}

        dev = be.device
        pages = common.Pages(num_pages, args.seed)
        gen = torch.Generator(device=dev)
        gen.manual_seed(args.seed)
        bts = [torch.zeros((S, eng.MB), dtype=torch.int32, device=dev) for _ in range(2)]
        # checked replay on the emulation binds only host memory cgrt knows: register the
        # inputs (the new tensors of each step until the step after; on a GPU the driver knows them)
        reg_inputs = args.checked_replay and emu
        registered = []
        if reg_inputs:
            for i, t in enumerate(bts):
                be.register(t, f"block table {i}")
        active, next_id, finished = [], 0, 0
        host_us, stats_rows = [], []
        checks = {"steps_checked": 0, "bitwise_equal": 0, "max_hidden_diff": 0.0, "attn_checks": 0,
                  "attn_max_diff": 0.0, "attn_max_excess": -1.0}
        t_start = time.perf_counter()
        for step in range(steps):
            if time.perf_counter() - common.T0 > args.time_limit:
                say(f"time limit reached after {step} steps")
                break
            stage(f"step {step}: preparing the inputs")
            # arrivals (ragged contexts, log-uniform), admitted while pages and slots last
            for _ in range(3):
                if len(active) >= S or (active and rng.random() > 0.35):
                    break
                ctx = int(math.exp(rng.uniform(math.log(16), math.log(max_ctx))))
                out_len = rng.randint(1, max_new)
                got = pages.take(pages_for(ctx + out_len, cfg.page_size))
                if got is None:
                    break
                eng.kv.fill_pages(got[:pages_for(ctx, cfg.page_size)], gen, cfg.kv_init_std)
                active.append(Req(next_id, ctx, out_len, got, rng.randrange(cfg.vocab)))
                next_id += 1
            if not active:
                raise RuntimeError("no request could be admitted: raise --kv-tokens")
            n = len(active)
            tok = torch.zeros(S, dtype=torch.int64)
            lens = torch.zeros(S, dtype=torch.int32)
            pos = torch.zeros(S, dtype=torch.int64)
            bt_host = torch.zeros((S, eng.MB), dtype=torch.int32)
            for i, r in enumerate(active):
                tok[i], lens[i], pos[i] = r.token, r.seq_len, r.seq_len - 1
                bt_host[i, :len(r.pages)] = torch.tensor(r.pages, dtype=torch.int32)
            bt = bts[step % 2]
            if emu:
                inputs = {"token_ids": tok.clone(), "req_seq_lens": lens.clone(), "req_positions": pos.clone()}
                bt.copy_(bt_host)
            else:
                inputs = {k: v.pin_memory().to(dev, non_blocking=True)
                          for k, v in (("token_ids", tok), ("req_seq_lens", lens), ("req_positions", pos))}
                bt.copy_(bt_host.pin_memory(), non_blocking=True)
            inputs["block_table"] = bt
            if reg_inputs:
                for k in ("token_ids", "req_seq_lens", "req_positions"):
                    be.register(inputs[k], f"step input {k}")
            B = eng.decode_set.bucket_rows(n)
            stage(f"step {step}: the replay ({n} requests, bucket {B})")
            if args.device_launch and not emu:
                torch.cuda.current_stream().synchronize()  # the step waits for no stream: inputs first
            t0 = time.perf_counter()
            eng.decode_set.step(n, bind=inputs)
            host_us.append((time.perf_counter() - t0) * 1e6)
            if args.device_launch:
                eng.decode_set.synchronize()  # before anything reads what the step wrote
            if reg_inputs:  # the previous step's inputs are no longer bound
                for t in registered:
                    be.unregister(t)
                registered = [inputs[k] for k in ("token_ids", "req_seq_lens", "req_positions")]
            if step < check_steps:
                stage(f"step {step}: the eager check")
                got_tok = eng.dec["out_tokens"][:B].clone()
                got_h = eng.dec["out_hidden"][:B].clone()
                eng.eager_decode(inputs, n, B)
                eq = tensor_equal(got_tok, eng.ref["out_tokens"][:B]) and tensor_equal(got_h, eng.ref["out_hidden"][:B])
                d = max_abs_diff(got_h, eng.ref["out_hidden"][:B])
                checks["steps_checked"] += 1
                checks["bitwise_equal"] += int(eq)
                checks["max_hidden_diff"] = max(checks["max_hidden_diff"], d)
                if not eq:
                    failures.append(f"step {step}: replay differs from eager (n={n}, bucket {B}, max |diff| {d:g})")
                    say(failures[-1])
                if step % args.attn_check_every == 0:
                    ex, dm = attention_check(eng, inputs, n, B)
                    checks["attn_checks"] += 1
                    checks["attn_max_diff"] = max(checks["attn_max_diff"], dm)
                    checks["attn_max_excess"] = max(checks["attn_max_excess"], ex)
                    if ex > 0:
                        failures.append(f"step {step}: MLA output off the fp32 reference by {dm:g}")
                        say(failures[-1])
            toks = eng.dec["out_tokens"][:n].tolist()  # the engine reads its tokens back each step
            stats_rows.append((n, B))
            still = []
            for r, t in zip(active, toks):
                r.token, r.gen = t, r.gen + 1
                if r.gen >= r.out_len or rng.random() < 0.01:
                    pages.give(r.pages)
                    finished += 1
                else:
                    still.append(r)
            active = still
            rng.shuffle(active)  # batch order changes from step to step
            if (step + 1) % max(1, steps // 10) == 0:
                say(f"step {step + 1}/{steps}: {n} requests (bucket {B}), {finished} finished, "
                    f"{checks['bitwise_equal']}/{checks['steps_checked']} checked steps equal")
        wall = time.perf_counter() - t_start
        stage("the final synchronization and verification")
        be.synchronize()
        be.verify()
        gs = eng.decode_set.stats()
        served = len(stats_rows)
        summary["serve"] = {"steps": served, "requests_started": next_id, "requests_finished": finished,
                            "wall_seconds": wall, "host_us_step_call": summarize_ms(host_us),
                            "mean_requests": sum(n for n, _ in stats_rows) / max(1, served),
                            "stats": gs}
        summary["checks"] = checks
        say(f"served {served} steps ({next_id} requests, {finished} finished) in {wall:.1f} s: "
            f"{gs['replays']} replays, {gs['rebinds']} steps with rebinds, "
            f"{gs['nodes_patched']} node updates by the host, "
            f"{gs['device_nodes_patched']} on the device ({'host' if args.host_patch else 'device'} patching); "
            f"cgrt_graphs_step host time p50 {summarize_ms(host_us).get('p50', 0):.1f} us")
        say(f"checks: {checks['bitwise_equal']}/{checks['steps_checked']} steps bit-equal to eager "
            f"(max |hidden diff| {checks['max_hidden_diff']:g}); MLA vs fp32 reference: {checks['attn_checks']} "
            f"checks, max |diff| {checks['attn_max_diff']:.3g}")
    return common.finish(be, args, summary, failures)


if __name__ == "__main__":
    sys.exit(common.guarded_main("serve", main))
