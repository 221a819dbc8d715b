"""How often the drafter's first draft equals the target's greedy token, and how often
greedy decoding repeats the fed token, in the seeded random model, and how close the
final hidden state stays to the fed token's embedding (their cosine) (config.py says why
both matter: with a tied head greedy decoding repeats its input forever).

Pure PyTorch with the fp32 reference attention over the paged cache (no cgrt, no GPU
needed; the full model takes about a minute on 2 CPU cores). Each step the target
decodes every request's fed token; the drafter then proposes the token after the
target's greedy token from (that token, the target's hidden state), as the first draft
of a speculative iteration does; the next step's target token decides it.

    python3 examples/deepseek_v2_lite/draft_agreement.py                 # full model
    python3 examples/deepseek_v2_lite/draft_agreement.py --tie-head      # tied head
"""
import argparse
import dataclasses
import json
import sys
import time

import torch

from config import FULL, REDUCED
from model import Activations, Exec, KVCache, Model, Weights, reference_mla


class _RefExec(Exec):
    """Segments as plain calls; attention by the fp32 reference."""

    def __init__(self, page):
        super().__init__(None, None, False)
        self.page = page

    def mla(self, plan, q, kv, block_table, seq_lens, out, lse, rows, scale, proj=None):
        o, _ = reference_mla(q, kv, block_table, seq_lens, scale, self.page)
        out.copy_(o.to(out.dtype))
        return out


def measure(cfg, requests, context, steps, device, seed=1, progress=print):
    w = Weights(cfg, device, with_drafter=True)
    page = cfg.page_size
    per_req = -(-(context + steps + 1) // page)
    g = torch.Generator(device=device).manual_seed(seed)
    kv = KVCache(cfg, requests * per_req, cfg.layers, device, distinct=min(cfg.layers, 4))
    dkv = KVCache(cfg, requests * per_req, 1, device)
    pages = list(range(requests * per_req))
    kv.fill_pages(pages, g, cfg.kv_init_std)
    dkv.fill_pages(pages, g, cfg.kv_init_std)
    m = Model(cfg, w, kv, Activations(cfg, requests, device), context + steps + 2, draft_kv=dkv,
              draft_act=Activations(cfg, requests, device))
    ex = _RefExec(page)
    bt = torch.arange(requests * per_req, dtype=torch.int32, device=device).view(requests, per_req)
    base = torch.arange(requests, device=device) * per_req * page
    tokens = torch.randint(0, cfg.vocab, (requests,), generator=g, device=device)
    agree = drafts = repeats = 0
    cos = []
    draft = None
    for step in range(steps):
        t0 = time.perf_counter()
        L = context + step + 1  # the fed token is the L-th

        def io_at(n):
            return {"positions": torch.full((requests,), n - 1, dtype=torch.long, device=device),
                    "slot_mapping": base + n - 1, "block_table": bt,
                    "seq_lens": torch.full((requests,), n, dtype=torch.int32, device=device),
                    "out_tokens": torch.zeros(requests, dtype=torch.long, device=device),
                    "out_hidden": torch.zeros((requests, cfg.hidden), dtype=torch.bfloat16, device=device)}

        io = dict(io_at(L), token_ids=tokens.clone())
        m.forward(ex, io, requests, None)
        y, h = io["out_tokens"].clone(), io["out_hidden"].clone()
        repeats += int((y == tokens).sum())
        cos.append(torch.nn.functional.cosine_similarity(w.embed[tokens].float(), h.float(), dim=-1))
        if draft is not None:
            agree += int((draft == y).sum())
            drafts += requests
        dio = io_at(L + 1)
        m.draft_forward(ex, y, h, dio, requests, None, dio["out_tokens"], dio["out_hidden"])
        draft, tokens = dio["out_tokens"].clone(), y
        progress(f"step {step + 1}/{steps}: {time.perf_counter() - t0:.1f} s; first drafts equal so far "
                 f"{agree}/{drafts}, greedy repeats {repeats}/{requests * (step + 1)}")
    return {"requests": requests, "context": context, "steps": steps, "tie_head": cfg.tie_head,
            "layers": cfg.layers, "first_drafts": drafts, "first_drafts_equal": agree,
            "first_draft_agreement": agree / drafts if drafts else None,
            "greedy_tokens": requests * steps, "greedy_repeats_fed_token": repeats,
            "cosine_final_hidden_fed_embedding_median": float(torch.cat(cos).median())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--context", type=int, default=1024, help="synthetic prompt tokens per request")
    p.add_argument("--steps", type=int, default=11, help="target steps (the first has no draft to decide)")
    p.add_argument("--tie-head", action="store_true", help="the LM head tied to the embedding")
    p.add_argument("--reduced", action="store_true", help="the emulation's reduced shape (seconds)")
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    if a.requests < 1 or a.context < 1 or a.steps < 2:
        p.error("--requests and --context must be >= 1, --steps >= 2")
    cfg = dataclasses.replace(REDUCED if a.reduced else FULL, tie_head=a.tie_head)
    with torch.no_grad():
        r = measure(cfg, a.requests, a.context, a.steps, torch.device(a.device),
                    progress=lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
