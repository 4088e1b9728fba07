"""Scaled dot-product attention on hpu: the Go flash-style kernel (kernels/attention.go)
behind hpex FusedSDPA, the bridge's `torch.ops.hpu.sdpa_*` ops, and
`F.scaled_dot_product_attention` for hpu tensors.

The forward keeps per query row only the scores' max `m` and the inverse softmax sum `linv`
(the bridge's recompute mode); the backward recomputes the probabilities tile by tile, so
memory stays linear in the sequence length. Dropout masks come from a Philox stream
(seed, offset) drawn from the hpu generator and regenerated in the backward.
"""
from __future__ import annotations

import math

import torch
from torch._subclasses.functional_tensor import FunctionalTensor as _FunctionalTensor
import torch._subclasses

from .. import _native
from .random_ops import _draw

_KERNEL_DTYPES = (torch.float32, torch.bfloat16)


# Signatures (shapes, dtypes, attributes) that passed check_like_torch: the meta run costs
# about 2 ms of Python per call, as much as the kernel at sequence 1024. Only passes are
# kept, so bad input raises every time.
_CHECKED: set = set()
_CHECKED_MAX = 512


def _signature(t):
    return None if t is None else (tuple(t.shape), t.dtype)


def check_like_torch(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> None:
    """Raise what F.scaled_dot_product_attention raises for these shapes and dtypes (run on
    meta tensors: no data, torch's own checks)."""
    key = (_signature(q), _signature(k), _signature(v), _signature(attn_mask), dropout_p, is_causal, scale, enable_gqa)
    try:
        if key in _CHECKED:
            return
    except TypeError:  # an unhashable attribute: check every time
        key = None

    def meta(t):
        return None if t is None else torch.empty(t.shape, dtype=t.dtype, device="meta")
    with torch.no_grad():
        torch.nn.functional.scaled_dot_product_attention(meta(q), meta(k), meta(v), attn_mask=meta(attn_mask),
                                                         dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                                         enable_gqa=enable_gqa)
    if key is not None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED.add(key)


def _stats_shape(q):
    return q.shape[:-1]


def attention_forward(q, k, v, mask, dropout_p: float, scale: float, is_causal: bool, seed: tuple[int, int],
                      fast: bool = False):
    """4-D q [B,Hq,L,E], k [B,Hkv,S,E], v [B,Hkv,S,Ev], mask broadcastable to [B,Hq,L,S]
    (bool keep or additive float) -> out [B,Hq,L,Ev], m, linv (float32 [B,Hq,L]). `fast` is
    softmax_mode="fast": the exponentials are rounded to bfloat16 before they meet v."""
    B, Hq, L, _ = q.shape
    S, Ev = k.shape[2], v.shape[3]
    out = torch.empty((B, Hq, L, Ev), dtype=q.dtype, device=q.device)
    m = torch.empty((B, Hq, L), dtype=torch.float32, device=q.device)
    linv = torch.empty((B, Hq, L), dtype=torch.float32, device=q.device)
    if out.numel() == 0:
        m.fill_(float("-inf"))
        linv.zero_()
        return out, m, linv
    ts = [out, m, linv, q, k, v]
    if mask is not None:
        ts.append(mask.expand(B, Hq, L, S))
    _native.run("attention_fwd", ts, (int(bool(is_causal)), seed[0], seed[1], int(bool(fast))),
                (float(scale), float(dropout_p)))
    return out, m, linv


def attention_backward(dout, q, k, v, out, m, linv, mask, dropout_p: float, scale: float, is_causal: bool,
                       seed: tuple[int, int], fast: bool = False):
    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if q.numel() == 0 or k.numel() == 0 or v.numel() == 0 or dout.numel() == 0:
        return dq.zero_(), dk.zero_(), dv.zero_()
    ts = [dq, dk, dv, dout.to(q.dtype), q, k, v, out, m.contiguous(), linv.contiguous()]
    if mask is not None:
        ts.append(mask.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2]))
    _native.run("attention_bwd", ts, (int(bool(is_causal)), seed[0], seed[1], int(bool(fast))),
                (float(scale), float(dropout_p)))
    return dq, dk, dv


def dropout_mask(shape, device, dropout_p: float, seed: tuple[int, int]) -> torch.Tensor:
    """The keep mask (bool, True = kept) that attention with this seed applied."""
    dm = torch.empty(shape, dtype=torch.bool, device=device)
    if dm.numel():
        _native.run("attention_dropout_mask", [dm], (0, seed[0], seed[1]), (1.0, float(dropout_p)))
    return dm


def new_seed(dropout_p: float) -> tuple[int, int]:
    return _draw(None) if dropout_p > 0 else (0, 0)


def native_ok(*ts) -> bool:
    """Whether the Go kernel can take these operands (real hpu float32/bfloat16 tensors of
    one dtype; not fake or meta tensors being traced)."""
    dt = ts[0].dtype
    for t in ts:
        if t is None:
            continue
        if t.device.type != "hpu" or t.dtype != dt or dt not in _KERNEL_DTYPES:
            return False
        if isinstance(t, torch._subclasses.FakeTensor) or torch._is_functional_tensor(t):
            return False
        if isinstance(t, _FunctionalTensor):  # AOT autograd's Python wrapper (compile with grad)
            return False
    return True


class AttentionFunction(torch.autograd.Function):
    """Attention on 4-D operands (GQA when Hq is a multiple of Hkv); returns out."""

    @staticmethod
    def forward(ctx, q, k, v, mask, dropout_p, is_causal, scale, seed, fast=False):
        out, m, linv = attention_forward(q, k, v, mask, dropout_p, scale, is_causal, seed, fast)
        ctx.save_for_backward(q, k, v, out, m, linv, mask)
        ctx.args = (dropout_p, scale, is_causal, seed, fast)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, m, linv, mask = ctx.saved_tensors
        dropout_p, scale, is_causal, seed, fast = ctx.args
        dq, dk, dv = attention_backward(dout.contiguous(), q, k, v, out, m, linv, mask, dropout_p, scale,
                                        is_causal, seed, fast)
        return dq, dk, dv, None, None, None, None, None, None


def sdpa_4d(q, k, v, attn_mask, dropout_p, is_causal, scale, seed=None, fast=False):
    """Bring F.sdpa's operands (any batch dims, broadcast batches and masks) to the kernel's
    4-D layout outside autograd (so expand/reshape get their own gradients) and run it."""
    batch = torch.broadcast_shapes(q.shape[:-3] if q.dim() >= 4 else (), k.shape[:-3] if k.dim() >= 4 else (),
                                   v.shape[:-3] if v.dim() >= 4 else ())
    if q.dim() == 4 and k.dim() == 4 and v.dim() == 4:
        B = batch[0] if batch else 1
        q4 = q.expand(B, *q.shape[1:])
        k4 = k.expand(B, *k.shape[1:])
        v4 = v.expand(B, *v.shape[1:])
        lead = None
    else:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        q4 = q.expand(*lead, *q.shape[-2:]).reshape(1, -1, *q.shape[-2:])
        k4 = k.expand(*lead, *k.shape[-2:]).reshape(1, -1, *k.shape[-2:])
        v4 = v.expand(*lead, *v.shape[-2:]).reshape(1, -1, *v.shape[-2:])
    mask = None
    if attn_mask is not None:
        L, S = q4.shape[2], k4.shape[2]
        if lead is None:
            mask = attn_mask.expand(q4.shape[0], q4.shape[1], L, S)
        else:
            mask = attn_mask.expand(*lead, L, S).reshape(1, -1, L, S)
        mask = mask.detach()
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if seed is None:
        seed = new_seed(dropout_p)
    out = AttentionFunction.apply(q4, k4, v4, mask, float(dropout_p), bool(is_causal), float(scale), seed,
                                  bool(fast))
    if lead is not None:
        out = out.reshape(*lead, q.shape[-2], v.shape[-1])
    return out


# -------------------------------------------------- F.scaled_dot_product_attention on hpu

_aten_lib = torch.library.Library("aten", "IMPL")
_SDPA = torch.ops.aten.scaled_dot_product_attention.default


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    if (not native_ok(query, key, value) or (attn_mask is not None and attn_mask.device.type != "hpu")
            or (attn_mask is not None and attn_mask.requires_grad and torch.is_grad_enabled())):
        # A traced (fake) or mixed call, or a float mask that is a learned bias (BEiT's,
        # data2vec's relative position bias), whose gradient the fused kernel does not
        # compute: torch's own composite (the math path, native ops).
        return _SDPA.decompose(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                               enable_gqa=enable_gqa)
    check_like_torch(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if attn_mask is not None and is_causal:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    return sdpa_4d(query, key, value, attn_mask, dropout_p, is_causal, scale)


for _key in ("AutogradHPU", "HPU"):
    _aten_lib.impl("scaled_dot_product_attention", scaled_dot_product_attention, _key)


# ------------------------------------------------------------- the bridge's sdpa ops

_hpu_lib = torch.library.Library("hpu", "FRAGMENT")

_FWD_ARGS = ("Tensor q, Tensor k, Tensor v, Tensor? attention_mask, float p, float scale, bool is_causal, "
             "str softmax_mode, Tensor? valid_seq_len, str seq_padding_type")
_RECOMP_ARGS = ("Tensor q, Tensor k, Tensor v, Tensor? attention_mask, float p, float scale, bool is_causal, "
                "bool requires_backward, str softmax_mode, Tensor? valid_seq_len, str seq_padding_type")


def _define(schema: str, impl, fake) -> None:
    name = schema.split("(", 1)[0]
    _hpu_lib.define(schema)
    _hpu_lib.impl(name, impl, "HPU")
    torch.library.register_fake(f"hpu::{name}")(fake)


def _is_fast(softmax_mode) -> bool:
    return str(softmax_mode).lower() == "fast"


def _seed_tensor(seed, device):
    return torch.tensor(list(seed), dtype=torch.int64).to(device)


def _seed_of(seed: torch.Tensor | None) -> tuple[int, int]:
    """A seed operand as (seed, offset): our [seed, offset] pair, or a lone seed."""
    if seed is None:
        return (0, 0)
    vals = [int(x) for x in seed.reshape(-1).tolist()]
    return (vals[0], vals[1] if len(vals) > 1 else 0)


def _valid_len_mask(q, k, valid_seq_len, seq_padding_type):
    """A bool keep mask [B,1,L,S] for causal attention over per-batch valid lengths, the
    padding on the left or the right (the bridge's valid_seq_len, inference only)."""
    B, L, S = q.shape[0], q.shape[-2], k.shape[-2]
    dev = q.device
    i = torch.arange(L, device=dev).view(1, L, 1)
    j = torch.arange(S, device=dev).view(1, 1, S)
    keep = j <= i + (S - L)  # causal, aligned at the end as for cached keys; L == S is plain tril
    valid = valid_seq_len.to(dev).view(B, 1, 1).to(torch.int64)
    if str(seq_padding_type).lower() == "left":
        keep = keep & (j >= S - valid)
    else:
        keep = keep & (j < valid)
    return keep.unsqueeze(1)


def _mask_and_causal(q, k, attention_mask, is_causal, valid_seq_len, seq_padding_type):
    if valid_seq_len is not None:
        return _valid_len_mask(q, k, valid_seq_len, seq_padding_type), False
    return attention_mask, is_causal


def attention_probs(q, k, mask, is_causal, scale):
    """The attention probabilities [B,Hq,L,S] (materialised: the bridge's non-recompute ops
    return them), in float32 arithmetic, in q's dtype; GQA by repeating k's heads."""
    hq, hk = q.shape[1], k.shape[1]
    if q.dim() == 4 and hq != hk and hk != 1:
        k = k.repeat_interleave(hq // hk, dim=1)
    s = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale
    if is_causal:
        L, S = s.shape[-2], s.shape[-1]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.float()
    return torch.softmax(s, dim=-1).to(q.dtype)


# Recompute (flash) ops: the forward keeps the row max m and the inverse sum linv.

def _recomp_fwd(seed, q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, valid_seq_len,
                seq_padding_type):
    mask, causal = _mask_and_causal(q, k, attention_mask, is_causal, valid_seq_len, seq_padding_type)
    with torch.no_grad():
        out, m, linv = attention_forward(q, k, v, mask, p, scale, causal, seed, _is_fast(softmax_mode))
    return out, m.unsqueeze(-1), linv.unsqueeze(-1), _seed_tensor(seed, q.device)


def sdpa_recomp_fwd(q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, valid_seq_len,
                    seq_padding_type):
    return _recomp_fwd(new_seed(p), q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode,
                       valid_seq_len, seq_padding_type)


def sdpa_recomp_fwd_dropout_seed(seed, q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode,
                                 valid_seq_len, seq_padding_type):
    return _recomp_fwd(_seed_of(seed), q, k, v, attention_mask, p, scale, is_causal, requires_backward,
                       softmax_mode, valid_seq_len, seq_padding_type)


def sdpa_recomp_bwd(grad, q, k, v, attention_mask, m, linv, seed, is_causal, p, scale, softmax_mode, fwd_out):
    with torch.no_grad():
        return attention_backward(grad.contiguous(), q, k, v, fwd_out, m.reshape(q.shape[:-1]),
                                  linv.reshape(q.shape[:-1]), attention_mask, p, scale, is_causal, _seed_of(seed),
                                  _is_fast(softmax_mode))


def _recomp_fwd_fake(q, k, v, *rest):
    st = q.new_empty((*q.shape[:-1], 1), dtype=torch.float32)
    return (q.new_empty((*q.shape[:-1], v.shape[-1])), st, torch.empty_like(st),
            q.new_empty((2,), dtype=torch.int64))


def _bwd_fake(grad, q, k, v, *rest):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


for _name in ("sdpa_recomp_fwd", "sdpa_recomp_fwd_dropout", "sdpa_recomp_fwd_non_dropout"):
    # The dropout/non_dropout variants are the same computation (the bridge splits them
    # so torch.compile can insert a seed); the non_dropout one names its arg softmax_modem.
    _args = _RECOMP_ARGS.replace("softmax_mode", "softmax_modem") if _name.endswith("non_dropout") else _RECOMP_ARGS
    _define(f"{_name}({_args}) -> (Tensor, Tensor, Tensor, Tensor)", sdpa_recomp_fwd, _recomp_fwd_fake)
_define(f"sdpa_recomp_fwd_dropout_seed(Tensor seed, {_RECOMP_ARGS}) -> (Tensor, Tensor, Tensor, Tensor)",
        sdpa_recomp_fwd_dropout_seed, lambda seed, q, k, v, *rest: _recomp_fwd_fake(q, k, v))
_define("sdpa_recomp_bwd(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor? attention_mask, Tensor m, Tensor linv, "
        "Tensor? seed, bool is_causal, float p, float scale, str softmax_mode, Tensor fwd_out) "
        "-> (Tensor, Tensor, Tensor)", sdpa_recomp_bwd, _bwd_fake)


# Non-recompute ops: the forward returns the probabilities P and the dropout keep mask
# dm; the backward works from them.

def _fwd(seed, q, k, v, attention_mask, p, scale, is_causal, softmax_mode, valid_seq_len, seq_padding_type):
    mask, causal = _mask_and_causal(q, k, attention_mask, is_causal, valid_seq_len, seq_padding_type)
    with torch.no_grad():
        out, _, _ = attention_forward(q, k, v, mask, p, scale, causal, seed, _is_fast(softmax_mode))
        probs = attention_probs(q, k, mask, causal, scale)
        dm = dropout_mask(probs.shape, q.device, p, seed) if p > 0 else None
    # dm is an optional output: a placeholder when there is no dropout
    return out, probs, dm if dm is not None else q.new_empty((0,), dtype=torch.bool)


def sdpa_fwd(q, k, v, attention_mask, p, scale, is_causal, softmax_mode, valid_seq_len, seq_padding_type):
    return _fwd(new_seed(p), q, k, v, attention_mask, p, scale, is_causal, softmax_mode, valid_seq_len,
                seq_padding_type)


def sdpa_fwd_dropout_seed(seed, q, k, v, attention_mask, p, scale, is_causal, softmax_mode, valid_seq_len,
                          seq_padding_type):
    return _fwd(_seed_of(seed), q, k, v, attention_mask, p, scale, is_causal, softmax_mode, valid_seq_len,
                seq_padding_type)


def sdpa_bwd(grad, q, k, v, P, dm, is_causal, p, scale, fwd_out):
    """Gradients from the saved probabilities: with D = P*keep/(1-p),
    dv = D^T g, dP = (g v^T)*keep/(1-p), dS = P*(dP - rowsum(dP*P)), dq = dS k*scale,
    dk = dS^T q*scale (GQA: k/v heads summed over their query group)."""
    with torch.no_grad():
        hq, hk = q.shape[1], k.shape[1]
        rep = hq // hk if q.dim() == 4 and hq != hk else 1
        kf, vf = k.float(), v.float()
        if rep > 1:
            kf, vf = kf.repeat_interleave(rep, dim=1), vf.repeat_interleave(rep, dim=1)
        g, pf = grad.float(), P.float()
        keep = None
        if dm is not None and dm.numel() and p > 0:
            keep = dm.to(torch.float32) / (1.0 - p)
        d = pf * keep if keep is not None else pf
        dv = torch.matmul(d.transpose(-2, -1), g)
        dp = torch.matmul(g, vf.transpose(-2, -1))
        if keep is not None:
            dp = dp * keep
        ds = pf * (dp - (dp * pf).sum(-1, keepdim=True))
        dq = torch.matmul(ds, kf) * scale
        dk = torch.matmul(ds.transpose(-2, -1), q.float()) * scale
        if rep > 1:
            dk = dk.unflatten(1, (hk, rep)).sum(2)
            dv = dv.unflatten(1, (hk, rep)).sum(2)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _fwd_fake(q, k, v, attention_mask=None, p=0.0, *rest):
    # the keep mask is a placeholder without dropout, else shaped like the probabilities
    probs = q.new_empty((*q.shape[:-1], k.shape[-2]))
    return (q.new_empty((*q.shape[:-1], v.shape[-1])), probs,
            q.new_empty(probs.shape if p > 0 else (0,), dtype=torch.bool))


for _name in ("sdpa_fwd", "sdpa_fwd_dropout", "sdpa_fwd_non_dropout"):
    _define(f"{_name}({_FWD_ARGS}) -> (Tensor, Tensor, Tensor)", sdpa_fwd, _fwd_fake)
_define(f"sdpa_fwd_dropout_seed(Tensor seed, {_FWD_ARGS}) -> (Tensor, Tensor, Tensor)", sdpa_fwd_dropout_seed,
        lambda seed, q, k, v, *rest: _fwd_fake(q, k, v, *rest))
_define("sdpa_bwd(Tensor grad, Tensor q, Tensor k, Tensor v, Tensor P, Tensor? dm, bool is_causal, float p, "
        "float scale, Tensor fwd_out) -> (Tensor, Tensor, Tensor)", sdpa_bwd, _bwd_fake)
