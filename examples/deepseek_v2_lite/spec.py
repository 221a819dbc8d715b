"""Speculative decoding end to end through cgrt graphs: an MTP-style one-layer drafter
proposes k tokens in one graph launch (cgrt_graphs_draft, draft_steps = k), the target
verifies them as k + 1 single-token rows per request, and acceptance plus the advance of
lengths, positions, last token and hidden state happen on the device. One iteration is
two graph launches and no host synchronization; a round runs --iters iterations back to
back and synchronizes once at its end to read the emitted tokens.

    python3 examples/deepseek_v2_lite/spec.py                # GPU: full model
    CGRT_DRIVER=emulated python3 examples/deepseek_v2_lite/spec.py    # reduced, emulation

Acceptance is decided on the device (engine.Engine._accept): by default the real greedy
rule (draft j accepted while it equals the target's greedy token of the row before it),
so the emitted tokens are those of plain greedy decoding; with random weights the
drafter rarely agrees with the target, so --alpha forces a per-draft acceptance rate
(seeded uniform draws on the device) for benchmarks. Rejected drafts are rolled back by
advancing each request's length, position and KV slot by the accepted count + 1 only.
k = 1 runs the drafter as a plain graph step; k >= 2 as one cgrt_graphs_draft launch.
Verification uses single-token rows (row j of a request with length L + j).

Check (the first --check-rounds rounds): the round is run again eagerly from the same
state (the same segments and kernels at the same padded sizes, cgrt's metadata kernels
replaced by their PyTorch versions); the emitted tokens, lengths, positions, last tokens
and hidden states must be equal bit for bit. With the real rule, plain greedy decoding
from the same state (greedy_reference) must give the emitted tokens; a mismatch reports
the logit margin that decided it (verify rows run at another batch size than plain steps,
so a near-tie can round the other way on a GPU).
"""
import argparse
import math
import random
import sys
import time

import torch

import common
from common import say, stage
from engine import Engine, pages_for, summarize_ms
from model import rms_norm


def snapshot(eng):
    return {k: v.clone() for k, v in eng.spec_state().items()}


def restore(eng, snap):
    for k, v in eng.spec_state().items():
        v.copy_(snap[k])


def compare(eng, a, b, n):
    """Bitwise comparison of two spec states over the n live requests (the log's last
    column is the trash column of rejected positions and is left out)."""
    bad = []
    for k in ("L", "P", "x", "h", "cursor", "acc", "match"):
        if not torch.equal(a[k][:n], b[k][:n]):
            bad.append(k)
    if not torch.equal(a["log"][:n, :-1], b["log"][:n, :-1]):
        bad.append("log")
    if not torch.equal(a["iters"], b["iters"]):
        bad.append("iters")
    return bad


def greedy_reference(eng, snap, n, steps, graphs=False):
    """Plain greedy decoding of the n requests from the spec state `snap` (as snapshot()
    took it before the speculative iterations): `steps` eager decode steps of the target
    (the same segments and kernels), each request fed its own previous token. Returns
    (tokens [n, steps] int64, logits [steps] of [n, vocab] fp32 on the device) -- the
    logits decide the margins of mismatches. graphs: the steps through eng.decode_set."""
    cfg, dev = eng.cfg, eng.be.device
    x = snap["x"][:n].clone()
    L, P = snap["L"][:n].clone(), snap["P"][:n].clone()
    S = eng.S
    toks, logits = [], []
    B = n if eng.decode_set is None else eng.decode_set.bucket_rows(n)
    for _ in range(steps):
        inputs = {"token_ids": torch.zeros(S, dtype=torch.int64, device=dev),
                  "req_seq_lens": torch.zeros(S, dtype=torch.int32, device=dev),
                  "req_positions": torch.zeros(S, dtype=torch.int64, device=dev),
                  "block_table": torch.zeros((S, eng.MB), dtype=torch.int32, device=dev)}
        inputs["token_ids"][:n] = x
        inputs["req_seq_lens"][:n] = L
        inputs["req_positions"][:n] = P
        inputs["block_table"][:n] = eng.sbt[:n]
        if graphs:  # through the decode set (its step equals the eager one bit for bit)
            eng.decode_set.step(n, bind=inputs)
            t, h = eng.dec["out_tokens"][:n].clone(), eng.dec["out_hidden"][:n]
        else:
            eng.eager_decode(inputs, n, B)
            t, h = eng.ref["out_tokens"][:n].clone(), eng.ref["out_hidden"][:n]
        lg = (rms_norm(h, eng.weights.final_norm, cfg.rms_eps) @ eng.weights.head.t()).float()
        toks.append(t)
        logits.append(lg)
        x, L, P = t, L + 1, P + 1
    return torch.stack(toks, dim=1), logits


def compare_with_greedy(state, n, ref_tokens, ref_logits):
    """Emitted tokens of a speculative run (state: snapshot() after it) against plain
    greedy decoding from the same start (greedy_reference). Per request, the first
    min(emitted, reference steps) tokens are compared up to the first mismatch (after one
    the sequences diverge); each mismatch reports the reference's logit margin between
    its greedy token and the emitted one (a margin near 0 is a numerical tie: the verify
    rows run at another batch size than the plain step, so their GEMMs round
    differently). Returns {"compared", "mismatches", "mismatch_details",
    "largest_mismatch_margin"} (the largest reference margin among the mismatches, None
    without one)."""
    cursor = state["cursor"][:n].tolist()
    log = state["log"][:n].cpu()
    ref = ref_tokens.cpu()
    compared, details = 0, []
    for r in range(n):
        m = min(cursor[r], ref.shape[1])
        for j in range(m):
            compared += 1
            got, want = int(log[r, j]), int(ref[r, j])
            if got != want:
                lg = ref_logits[j][r]
                details.append({"request": r, "token_index": j, "emitted": got, "greedy": want,
                                "logit_margin": float(lg[want] - lg[got]),
                                "greedy_top2_margin": float(lg.topk(2).values[0] - lg.topk(2).values[1])})
                break
    return {"compared": compared, "mismatches": len(details), "mismatch_details": details,
            "largest_mismatch_margin": max((d["logit_margin"] for d in details), default=None)}


def setup_round(eng, rng, pages, gen, n, max_ctx, iters):
    """n requests with ragged contexts: state, block tables and synthetic prompt KV."""
    cfg, k = eng.cfg, eng.k
    S, MB = eng.Ss, eng.MB
    reqs = []
    L = torch.zeros(S, dtype=torch.int32)
    P = torch.zeros(S, dtype=torch.int64)
    x = torch.zeros(S, dtype=torch.int64)
    bt = torch.zeros((S, MB), dtype=torch.int32)
    for i in range(n):
        ctx = int(math.exp(rng.uniform(math.log(16), math.log(max_ctx))))
        need = pages_for(ctx + 1 + iters * (k + 1) + k, cfg.page_size)
        got = pages.take(need)
        if got is None:
            raise RuntimeError("KV cache too small for this round: raise --kv-tokens")
        reqs.append(got)
        filled = got[:pages_for(ctx, cfg.page_size)]
        eng.kv.fill_pages(filled, gen, cfg.kv_init_std)
        eng.draft_kv.fill_pages(filled, gen, cfg.kv_init_std)
        L[i], P[i], x[i] = ctx + 1, ctx, rng.randrange(cfg.vocab)
        bt[i, :len(got)] = torch.tensor(got, dtype=torch.int32)
    dev = eng.be.device
    eng.sL.copy_(L.to(dev))
    eng.sP.copy_(P.to(dev))
    eng.sx.copy_(x.to(dev))
    eng.sbt.copy_(bt.to(dev))
    for t in (eng.sh, eng.out_log, eng.cursor, eng.acc_sum, eng.match_sum, eng.iters):
        t.zero_()
    return reqs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_common_args(p)
    p.add_argument("--k", type=int, default=3, help="draft tokens per iteration (>= 2)")
    p.add_argument("--max-num-seqs", type=int, default=None, help="default 32 GPU, 4 emulation")
    p.add_argument("--rounds", type=int, default=None, help="default 12 GPU, 3 emulation")
    p.add_argument("--iters", type=int, default=None, help="iterations per round (default 16 GPU, 3 emu)")
    p.add_argument("--max-context", type=int, default=None, help="default 32768 GPU, 200 emulation")
    p.add_argument("--alpha", type=float, default=None,
                   help="forced per-draft acceptance probability (benchmarks); default: the real greedy rule, "
                        "checked against plain greedy decoding")
    p.add_argument("--check-rounds", type=int, default=None, help="rounds checked against eager (default 3 / all)")
    p.add_argument("--kv-tokens", type=int, default=None)
    args = p.parse_args(argv)

    stage("opening the backend")
    be, cfg = common.open_backend(args)
    emu = be.emulated
    S = args.max_num_seqs or (4 if emu else 32)
    rounds = args.rounds or (3 if emu else 12)
    iters = args.iters or (3 if emu else 16)
    max_ctx = args.max_context or (200 if emu else 32768)
    check_rounds = args.check_rounds if args.check_rounds is not None else (rounds if emu else 3)
    k = args.k
    max_model_len = max_ctx + 1 + iters * (k + 1) + k + 1
    kv_tokens = args.kv_tokens or (S * (max_model_len + 64))
    num_pages = pages_for(kv_tokens, cfg.page_size)
    log_width = iters * (k + 1) + 2
    stream, in_stream = common.run_stream(be)
    rng = random.Random(args.seed)
    summary = {"meta": common.run_meta(be), "config": vars(args) | {"max_num_seqs": S, "rounds": rounds,
               "iters": iters, "max_context": max_ctx, "model": cfg.__dict__}, "rounds": []}
    failures = []
    with in_stream:
        stage("building the engine (weights, KV caches, warm-up, lock)")
        eng = Engine(be, cfg, S, max_model_len, num_pages, spec_k=k, spec_seqs=S, alpha=args.alpha,
                     log_width=log_width, stream=stream, progress=say, device_patch=not args.host_patch,
                     vproj=bool(args.vproj))
        stage("capturing the draft and verify sets")
        td, tv = eng.capture_spec()
        ds, vs = eng.draft_set.stats(), eng.verify_set.stats()
        say(f"captured the draft set ({ds['buckets']} graphs incl. {k}-step draft loops) in {td:.2f} s and the "
            f"verify set ({vs['buckets']} buckets of multiples of {k + 1} rows) in {tv:.2f} s")
        summary["capture"] = {"draft_seconds": td, "verify_seconds": tv, "draft": ds, "verify": vs,
                              "draft_buckets": eng.draft_set.buckets(), "verify_buckets": eng.verify_set.buckets()}
        dev = be.device
        gen = torch.Generator(device=dev)
        gen.manual_seed(args.seed)
        for rd in range(rounds):
            if time.perf_counter() - common.T0 > args.time_limit:
                say(f"time limit reached after {rd} rounds")
                break
            stage(f"round {rd}: setup")
            pages = common.Pages(num_pages, args.seed + rd)
            n = rng.randint(1, S) if rd else S
            setup_round(eng, rng, pages, gen, n, max_ctx, iters)
            checked = rd < check_rounds
            snap = snapshot(eng) if checked else None
            d0 = eng.draft_set.stats()["draft_loops"]
            if not emu:
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
                torch.cuda.current_stream().synchronize()
                ev[0].record()
            stage(f"round {rd}: {iters} iterations through the graphs")
            t0 = time.perf_counter()
            for _ in range(iters):
                eng.spec_iteration(n)
            host_s = time.perf_counter() - t0
            if not emu:
                ev[1].record()
            be.synchronize()
            gpu_ms = ev[0].elapsed_time(ev[1]) if not emu else host_s * 1e3
            launches = eng.draft_set.stats()["draft_loops"] - d0
            st = snapshot(eng)
            emitted = int(st["cursor"][:n].sum())
            accepted = int(st["acc"][:n].sum())
            row = {"round": rd, "requests": n, "iterations": iters, "draft_launches": launches,
                   "proposed": n * k * iters, "accepted": accepted, "emitted": emitted,
                   "greedy_agreement": int(st["match"][:n].sum()), "ms": gpu_ms, "host_ms": host_s * 1e3,
                   "ms_per_emitted_token": gpu_ms / max(1, emitted)}
            if checked:
                stage(f"round {rd}: the eager check")
                graph_state = st
                restore(eng, snap)
                Bd = eng.draft_set.bucket_rows(n)
                Bv = eng.verify_set.bucket_rows(n * (k + 1))
                for _ in range(iters):
                    eng.eager_spec_iteration(n, Bd, Bv)
                be.synchronize()
                bad = compare(eng, graph_state, snapshot(eng), n)
                row["eager_equal"] = not bad
                if bad:
                    failures.append(f"round {rd}: graph run differs from eager in {bad}")
                    say(failures[-1])
            if checked and args.alpha is None:
                stage(f"round {rd}: plain greedy decoding from the same state")
                restore(eng, snap)
                steps = int(graph_state["cursor"][:n].max())
                ref_tok, ref_lg = greedy_reference(eng, snap, n, steps)
                g = compare_with_greedy(graph_state, n, ref_tok, ref_lg)
                row["greedy_check"] = g
                say(f"round {rd}: {g['compared']} emitted tokens against plain greedy decoding, "
                    f"{g['mismatches']} mismatches" + "".join(f" (request {d['request']} token {d['token_index']}: "
                                                           f"margin {d['logit_margin']:.3g})"
                                                           for d in g["mismatch_details"][:4]))
            summary["rounds"].append(row)
            say(f"round {rd}: {n} requests x {iters} iterations ({launches} draft-loop launches): {emitted} tokens "
                f"emitted, {accepted}/{n * k * iters} drafts accepted ({'real' if args.alpha is None else 'forced'}), {gpu_ms:.2f} ms"
                + (f", eager check {'equal' if row.get('eager_equal') else 'DIFFERS'}" if checked else ""))
        be.synchronize()
        be.verify()
        rows = summary["rounds"]
        summary["totals"] = {"emitted": sum(r["emitted"] for r in rows), "accepted": sum(r["accepted"] for r in rows),
                             "proposed": sum(r["proposed"] for r in rows),
                             "ms_per_emitted_token": summarize_ms([r["ms_per_emitted_token"] for r in rows]),
                             "draft": eng.draft_set.stats(), "verify": eng.verify_set.stats()}
    return common.finish(be, args, summary, failures)


if __name__ == "__main__":
    sys.exit(common.guarded_main("spec", main))
