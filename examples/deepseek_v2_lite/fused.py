"""The model's fused elementwise kernels: small Triton kernels on a GPU, pure-PyTorch
versions of the same functions elsewhere (cgrt's CPU emulation runs those as emulated
kernels; CI has no Triton).

    rms_norm_into(x, w, eps, out)        out = RMSNorm(x) * w (rows of x, fp32 inside)
    rope_kv_write(...)                   one kernel per layer: RMSNorm of the latent part,
                                         RoPE of k_pe and of every head's q_pe, the token's
                                         576 latent values written into the paged cache
                                         (slot < 0: the trash slot), the rotated q_pe
                                         written into the MLA query buffer q[:, :, 512:];
                                         it lets the kernel after it launch at its start
                                         (griddepcontrol.launch_dependents, sm_90+): the
                                         model's MLA split follows it (model.py)
    silu_mul_into(gate_up, out)          out = silu(gate) * up, gate_up = [gate | up]

Each takes its outputs as arguments and allocates nothing on the Triton path, so it is
one kernel node of a captured graph. The Triton kernels take no argument that depends on
the batch (the grid does), so one compilation (during the eager warm-up) serves every
bucket. `FUSED` says which path runs on CUDA tensors ("triton" or "torch").
"""
import torch
import torch.nn.functional as F

try:  # Triton is on the GPU machine; not on CI or the emulation
    import triton
    import triton.language as tl
except Exception:  # noqa: BLE001 - any import failure means: the PyTorch versions
    triton = None

try:  # Triton's griddepcontrol.launch_dependents (programmatic dependent launch, Triton >= 3.3)
    from triton.language.extra.cuda import gdc_launch_dependents as _gdc_launch_dependents  # noqa: F401
    _HAS_GDC = True
except Exception:  # noqa: BLE001 - older Triton, or none: the kernels do not trigger early
    _HAS_GDC = False

FUSED = "triton" if triton is not None else "torch"
WHY = "" if triton is not None else "triton is not importable"


def _use_triton(t):
    return FUSED == "triton" and t.is_cuda


def _gdc(t):
    """Whether a Triton kernel on t's device may let its dependents launch early
    (griddepcontrol: sm_90 and later)."""
    return _HAS_GDC and torch.cuda.get_device_capability(t.device)[0] >= 9


def warmup(cfg, device):
    """Compiles and runs each Triton kernel once with the model's sizes (eagerly, before
    any capture). A failure (no compiler on the machine, an old Triton) switches every
    later call to the PyTorch versions and is returned as the reason; None when the
    kernels run (or the PyTorch versions are in use anyway)."""
    global FUSED, WHY
    if FUSED != "triton" or device.type != "cuda":
        return None
    try:
        B, H, D, R = 2, cfg.heads, cfg.hidden, cfg.kv_lora_rank
        bf = dict(dtype=torch.bfloat16, device=device)
        x = torch.randn((B, D), **bf)
        rms_norm_into(x, torch.ones(D, **bf), cfg.rms_eps, torch.empty_like(x))
        qkv = torch.randn((B, H * cfg.qk_head + cfg.latent), **bf)
        pos = torch.zeros(B, dtype=torch.int64, device=device)
        slots = torch.tensor([0, -1], dtype=torch.int64, device=device)
        tab = torch.ones((4, cfg.rope_dim), dtype=torch.float32, device=device)
        kv = torch.zeros((2, cfg.page_size, cfg.latent), **bf)
        q = torch.zeros((B, H, cfg.latent), **bf)
        rope_kv_write(qkv, pos, slots, tab, tab, torch.ones(R, **bf), cfg.rms_eps, kv, q, cfg.page_size, H,
                      cfg.qk_head, cfg.qk_nope)
        gu = torch.randn((B, 2 * cfg.intermediate), **bf)
        silu_mul_into(gu, torch.empty((B, cfg.intermediate), **bf))
        torch.cuda.synchronize(device)
        return None
    except Exception as e:  # noqa: BLE001 - reported; the PyTorch versions compute the same
        FUSED, WHY = "torch", f"Triton kernels failed at warm-up: {e!r}"[:500]
        return WHY


# ---- PyTorch versions (the emulation, CPU tensors, a GPU without Triton) -------------

def _rms_rows(x32, eps):
    return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm_ref(x, w, eps):
    """RMSNorm in fp32, one rounding to x's dtype at the end."""
    return (_rms_rows(x.float(), eps) * w.float()).to(x.dtype)


def rope_ref(x, cos, sin):
    """Rotate-half RoPE in fp32: x [..., 64], cos/sin broadcastable [..., 64]."""
    x32 = x.float()
    h = x32.shape[-1] // 2
    x1, x2 = x32[..., :h], x32[..., h:]
    c, s = cos[..., :h], sin[..., :h]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def _rope_kv_torch(qkv, positions, slots, cos, sin, kv_w, eps, kv_flat, q, trash_slot, heads, qk_head, nope, R):
    B = qkv.shape[0]
    rope = cos.shape[1]
    cs, sn = cos.index_select(0, positions), sin.index_select(0, positions)
    kv_a = qkv[:, heads * qk_head:]
    c = rms_norm_ref(kv_a[:, :R], kv_w, eps)
    k_pe = rope_ref(kv_a[:, R:R + rope], cs, sn)
    q_pe = rope_ref(qkv[:, :heads * qk_head].view(B, heads, qk_head)[..., nope:], cs[:, None, :], sn[:, None, :])
    q[:, :, R:].copy_(q_pe)
    slot = torch.where(slots >= 0, slots, torch.full_like(slots, trash_slot))
    kv_flat.index_copy_(0, slot, torch.cat([c, k_pe], dim=-1))


# ---- Triton kernels --------------------------------------------------------------------

if triton is not None:
    @triton.jit
    def _rms_norm_kernel(x_ptr, x_stride, w_ptr, y_ptr, y_stride, eps, D: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK)
        m = offs < D
        x = tl.load(x_ptr + row * x_stride + offs, mask=m, other=0.0).to(tl.float32)
        r = tl.rsqrt(tl.sum(x * x, axis=0) / D + eps)
        w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + offs, (x * r * w).to(tl.bfloat16), mask=m)

    @triton.jit
    def _rope_kv_kernel(qkv_ptr, qkv_stride, pos_ptr, slot_ptr, cos_ptr, sin_ptr, w_ptr, kv_ptr, q_ptr, trash, eps,
                        H: tl.constexpr, HP: tl.constexpr, QK: tl.constexpr, NOPE: tl.constexpr,
                        R: tl.constexpr, ROPE: tl.constexpr, GDC: tl.constexpr):
        if GDC:
            # The MLA split kernel after this one (cgrt plans with programmatic_launch 2)
            # may launch now: it reads seq_lens and the block table, which this kernel
            # does not write, and waits for this kernel before it reads q or the cache.
            tl.extra.cuda.gdc_launch_dependents()
        LAT: tl.constexpr = R + ROPE
        HALF: tl.constexpr = ROPE // 2
        row = tl.program_id(0).to(tl.int64)
        base = qkv_ptr + row * qkv_stride
        pos = tl.load(pos_ptr + row).to(tl.int64)
        slot = tl.load(slot_ptr + row).to(tl.int64)
        slot = tl.where(slot >= 0, slot, trash)
        j = tl.arange(0, HALF)
        c = tl.load(cos_ptr + pos * ROPE + j)
        s = tl.load(sin_ptr + pos * ROPE + j)
        # latent part: RMSNorm, into the cache
        ro = tl.arange(0, R)
        cv = tl.load(base + H * QK + ro).to(tl.float32)
        rr = tl.rsqrt(tl.sum(cv * cv, axis=0) / R + eps)
        w = tl.load(w_ptr + ro).to(tl.float32)
        dst = kv_ptr + slot * LAT
        tl.store(dst + ro, (cv * rr * w).to(tl.bfloat16))
        # k_pe: RoPE, into the cache
        k1 = tl.load(base + H * QK + R + j).to(tl.float32)
        k2 = tl.load(base + H * QK + R + HALF + j).to(tl.float32)
        tl.store(dst + R + j, (k1 * c - k2 * s).to(tl.bfloat16))
        tl.store(dst + R + HALF + j, (k2 * c + k1 * s).to(tl.bfloat16))
        # every head's q_pe: RoPE, into q[row, h, R:]
        h = tl.arange(0, HP)[:, None]
        hm = h < H
        qs = base + h * QK + NOPE + j[None, :]
        q1 = tl.load(qs, mask=hm, other=0.0).to(tl.float32)
        q2 = tl.load(qs + HALF, mask=hm, other=0.0).to(tl.float32)
        qd = q_ptr + row * (H * LAT) + h * LAT + R + j[None, :]
        tl.store(qd, (q1 * c[None, :] - q2 * s[None, :]).to(tl.bfloat16), mask=hm)
        tl.store(qd + HALF, (q2 * c[None, :] + q1 * s[None, :]).to(tl.bfloat16), mask=hm)

    @triton.jit
    def _silu_mul_kernel(gu_ptr, out_ptr, I: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = offs < I
        g = tl.load(gu_ptr + row * (2 * I) + offs, mask=m, other=0.0).to(tl.float32)
        u = tl.load(gu_ptr + row * (2 * I) + I + offs, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * I + offs, (g / (1.0 + tl.exp(-g)) * u).to(tl.bfloat16), mask=m)


# ---- the functions the model calls ------------------------------------------------------

def rms_norm_into(x, w, eps, out):
    """out[r] = RMSNorm(x[r]) * w for the rows of x (x, out: 2-D, unit last stride)."""
    B, D = x.shape
    if B == 0:
        return out
    if _use_triton(x):
        _rms_norm_kernel[(B,)](x, x.stride(0), w, out, out.stride(0), eps, D=D,
                               BLOCK=triton.next_power_of_2(D), num_warps=8 if D >= 2048 else 4)
    else:
        out.copy_(rms_norm_ref(x, w, eps))
    return out


def rope_kv_write(qkv, positions, slots, cos, sin, kv_w, eps, kv_cache, q, trash_slot, heads, qk_head, nope):
    """One decode token per row: normalizes the latent part of qkv's kv_a, rotates k_pe
    and writes both (576 values) into the paged cache at the row's slot (slot < 0: the
    trash slot); rotates every head's q_pe into q[:, :, 512:]. qkv [B, heads * qk_head +
    576] (unit last stride), positions/slots int64 [B], cos/sin fp32 [max_pos, 64], q
    [B, heads, 576] contiguous, kv_cache [pages + 1, page, 576] contiguous."""
    B = qkv.shape[0]
    R = q.shape[2] - cos.shape[1]
    if B == 0:
        return
    kv_flat = kv_cache.view(-1, kv_cache.shape[-1])
    if _use_triton(qkv):
        _rope_kv_kernel[(B,)](qkv, qkv.stride(0), positions, slots, cos, sin, kv_w, kv_flat, q, trash_slot, eps,
                              H=heads, HP=triton.next_power_of_2(heads), QK=qk_head, NOPE=nope, R=R,
                              ROPE=cos.shape[1], GDC=_gdc(qkv), num_warps=4)
    else:
        _rope_kv_torch(qkv, positions, slots, cos, sin, kv_w, eps, kv_flat, q, trash_slot, heads, qk_head, nope, R)


def silu_mul_into(gate_up, out):
    """out = silu(gate) * up, gate_up = [gate | up] [B, 2I] contiguous, out [B, I] contiguous."""
    B, I = out.shape
    if B == 0:
        return out
    if _use_triton(gate_up):
        BLOCK = 1024
        _silu_mul_kernel[(B, triton.cdiv(I, BLOCK))](gate_up, out, I=I, BLOCK=BLOCK, num_warps=4)
    else:
        g, u = gate_up[:, :I].float(), gate_up[:, I:].float()
        out.copy_((F.silu(g) * u).to(out.dtype))
    return out
