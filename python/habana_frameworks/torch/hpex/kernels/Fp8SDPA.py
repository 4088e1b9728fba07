"""`torch.ops.hpu.fp8_sdpa_recomp_fwd` and its variants (`_non_dropout`, `_dropout`,
`_dropout_seed`, each also `.scalar` with float scales): the bridge's fp8 flash attention
forward, which Intel Neural Compressor's fp8 FusedSDPA and vLLM's fp8 path call.

q, k, v are float8_e4m3fn (or bfloat16) with dequantisation scales d_scale_q/k/v (multiplied in;
none = 1). In float32, emulating the fused kernel:
    S = softmax(scale * (q k^T) + mask)  (causal / attention_mask / valid_seq_len as sdpa_recomp_fwd)
    dropout on S with probability p (Philox stream of the seed, as the other sdpa ops)
    with q_scale_s: S is quantised to fp8 (S * q_scale_s, saturating) and dequantised by
        d_scale_s (none: 1 / q_scale_s) before it meets v
    O = S v
Outputs (out, m, linv, seed, amax_s, amax_o):
    out   O * q_scale_o cast to float8_e4m3fn when q_scale_o is given (a non-empty tensor, a
          non-zero float), else O in bfloat16 (q's dtype for bfloat16 q)
    m     the scaled scores' row max [..., L, 1] (bfloat16 for fp8 q, else q's dtype)
    linv  1 / row sum [..., L, 1] (float32; bfloat16 for fp8 q or softmax_mode "fast" with
          bfloat16 q)
    seed  the dropout seed, as sdpa_recomp_fwd's ([seed, offset] int64)
    amax_s the largest probability (before dropout and quantisation), float32 [1]
    amax_o the largest |O| before quantisation, float32 [1]
amax values are computed always (is_amax_s / is_amax_o only tell the bridge to emit them).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..._ops.hpex_attention import _mask_and_causal, _seed_of, _seed_tensor, dropout_mask, new_seed
from .Fp8Ops import _cast_to_fp8_v2

_lib = torch.library.Library("hpu", "FRAGMENT")

_ARGS = ("Tensor q, Tensor k, Tensor v, Tensor? attention_mask, float p, float scale, bool is_causal, "
         "bool requires_backward, str softmax_mode, {T} d_scale_q, {T} d_scale_k, {T} d_scale_v, {T} q_scale_s, "
         "{T} q_scale_o, {T} d_scale_s, bool is_amax_s, bool {amax_o}, Tensor? valid_seq_len, str seq_padding_type")
_OUT = " -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"


def _scale(s) -> Optional[torch.Tensor | float]:
    """A tensor scale (None or empty: none) or a float one (0: none)."""
    if s is None:
        return None
    if isinstance(s, torch.Tensor):
        return None if s.numel() == 0 else s.float().reshape(-1)[0]
    return None if float(s) == 0.0 else float(s)


def _deq(t: torch.Tensor, d) -> torch.Tensor:
    x = t.float()
    return x if d is None else x * d


def _fwd(seed, q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, d_scale_q, d_scale_k,
         d_scale_v, q_scale_s, q_scale_o, d_scale_s, is_amax_s, is_amax_o, valid_seq_len, seq_padding_type):
    fp8 = q.dtype == torch.float8_e4m3fn
    if q.dim() < 3 or k.dim() != q.dim() or v.dim() != q.dim():
        raise RuntimeError(f"fp8_sdpa_recomp_fwd: q, k, v must have the same rank, at least 3 ([B, H, L, E], or "
                           f"[B, G, H/G, L, E] for grouped heads), got {q.dim()}-D, {k.dim()}-D, {v.dim()}-D")
    mask, causal = _mask_and_causal(q, k, attention_mask, is_causal, valid_seq_len, seq_padding_type)
    if valid_seq_len is not None and q.dim() == 5:
        mask = mask.unsqueeze(1)  # [B, 1, L, S] -> [B, 1, 1, L, S]
    qd, kd, vd = _deq(q, _scale(d_scale_q)), _deq(k, _scale(d_scale_k)), _deq(v, _scale(d_scale_v))
    hq, hk = q.shape[1], k.shape[1]
    if q.dim() == 4 and hq != hk and hk != 1:  # 5-D grouped heads broadcast instead
        if hk == 0 or hq % hk:
            raise RuntimeError(f"fp8_sdpa_recomp_fwd: {hq} query heads are not a multiple of {hk} key heads")
        kd, vd = kd.repeat_interleave(hq // hk, dim=1), vd.repeat_interleave(hq // hk, dim=1)
    s = torch.matmul(qd, kd.transpose(-2, -1)) * float(scale)
    L, S = s.shape[-2], s.shape[-1]
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask.float()
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - m)
    l = e.sum(dim=-1, keepdim=True)
    probs = e / l
    amax_s = probs.amax().reshape(1) if probs.numel() else torch.zeros(1, device=q.device)
    if p > 0:
        keep = dropout_mask(probs.shape, probs.device, p, seed)
        probs = probs * keep / (1.0 - p)
    qs = _scale(q_scale_s)
    if qs is not None:
        ds = _scale(d_scale_s)
        probs = _cast_to_fp8_v2(probs, torch.as_tensor(qs, device=probs.device).reshape(1), False, False,
                                torch.float8_e4m3fn)[0].float()
        probs = probs * (ds if ds is not None else 1.0 / qs)
    o = torch.matmul(probs, vd)
    amax_o = o.abs().amax().reshape(1) if o.numel() else torch.zeros(1, device=q.device)
    qo = _scale(q_scale_o)
    if qo is not None:
        out = _cast_to_fp8_v2(o, torch.as_tensor(qo, device=o.device).reshape(1), False, False,
                              torch.float8_e4m3fn)[0]
    else:
        out = o.to(torch.bfloat16 if fp8 else q.dtype)
    m_dtype = torch.bfloat16 if fp8 else q.dtype
    fast = str(softmax_mode).lower() == "fast" and q.dtype == torch.bfloat16
    linv_dtype = torch.bfloat16 if fp8 or fast else torch.float32
    return (out, m.to(m_dtype), (1.0 / l).to(linv_dtype), _seed_tensor(seed, q.device), amax_s.float(),
            amax_o.float())


def fp8_sdpa_recomp_fwd(q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, *rest):
    return _fwd(new_seed(p), q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, *rest)


def fp8_sdpa_recomp_fwd_dropout_seed(seed, q, k, v, attention_mask, p, scale, is_causal, requires_backward,
                                     softmax_mode, *rest):
    return _fwd(_seed_of(seed), q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, *rest)


def _fake(q, k, v, attention_mask, p, scale, is_causal, requires_backward, softmax_mode, d_scale_q, d_scale_k,
          d_scale_v, q_scale_s, q_scale_o, d_scale_s, *rest):
    fp8 = q.dtype == torch.float8_e4m3fn
    out_dtype = torch.float8_e4m3fn if _fake_given(q_scale_o) else (torch.bfloat16 if fp8 else q.dtype)
    fast = str(softmax_mode).lower() == "fast" and q.dtype == torch.bfloat16
    stat = (*q.shape[:-1], 1)
    return (q.new_empty((*q.shape[:-1], v.shape[-1]), dtype=out_dtype),
            q.new_empty(stat, dtype=torch.bfloat16 if fp8 else q.dtype),
            q.new_empty(stat, dtype=torch.bfloat16 if fp8 or fast else torch.float32),
            q.new_empty((2,), dtype=torch.int64), q.new_empty((1,), dtype=torch.float32),
            q.new_empty((1,), dtype=torch.float32))


def _fake_given(s) -> bool:
    if s is None:
        return False
    if isinstance(s, torch.Tensor):
        return s.numel() > 0
    return float(s) != 0.0


for _name in ("fp8_sdpa_recomp_fwd", "fp8_sdpa_recomp_fwd_non_dropout", "fp8_sdpa_recomp_fwd_dropout",
              "fp8_sdpa_recomp_fwd_dropout_seed"):
    _seeded = _name.endswith("_seed")
    _amax_o = "is_amax_o" if _seeded else "is_amax_0"  # the bridge's spelling, per op
    for _overload, _t in (("", "Tensor?"), (".scalar", "float")):
        _args = ("Tensor seed, " if _seeded else "") + _ARGS.format(T=_t, amax_o=_amax_o)
        _lib.define(f"{_name}{_overload}({_args}){_OUT}")
        _qual = f"{_name}{_overload}"
        _impl = fp8_sdpa_recomp_fwd_dropout_seed if _seeded else fp8_sdpa_recomp_fwd
        for _key in ("HPU", "CPU"):
            _lib.impl(_qual, _impl, _key)
        if _seeded:
            torch.library.register_fake(f"hpu::{_qual}")(lambda seed, *a: _fake(*a))
        else:
            torch.library.register_fake(f"hpu::{_qual}")(_fake)
