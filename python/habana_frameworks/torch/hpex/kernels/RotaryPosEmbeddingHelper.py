"""Rotary position embedding helpers (V1/V2/V3, apply_rotary_pos_emb) on the native
hpu::rotary_pos_embedding kernel and its backward. Note the op's argument order: sin, cos."""
from __future__ import annotations

from enum import Enum

import torch

from habana_frameworks.torch._ops import hpex_ops  # noqa: F401


class RotaryPosEmbeddingMode(Enum):
    BLOCKWISE = 0  # GPT-NeoX / LLaMA rotate_half
    PAIRWISE = 1  # GPT-J interleaved pairs


def _mode_value(mode) -> int:
    return mode.value if isinstance(mode, RotaryPosEmbeddingMode) else int(mode)


def _match_dtypes(p, cos, sin):
    if torch.float32 in (p.dtype, cos.dtype, sin.dtype):
        return p.float(), cos.float(), sin.float()
    return p, cos.to(p.dtype), sin.to(p.dtype)


class _RoPE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, p, cos, sin, position_ids, offset, mode):
        ctx.save_for_backward(cos, sin, position_ids)
        ctx.offset, ctx.mode = offset, mode
        return torch.ops.hpu.rotary_pos_embedding(p, sin, cos, position_ids, offset, mode)

    @staticmethod
    def backward(ctx, grad):
        cos, sin, position_ids = ctx.saved_tensors
        g = torch.ops.hpu.rotary_pos_embedding_backward(grad.contiguous(), sin, cos, position_ids, ctx.offset, ctx.mode)
        return g, None, None, None, None, None


def _apply(p, cos, sin, position_ids=None, offset=0, mode=RotaryPosEmbeddingMode.BLOCKWISE):
    dtype = p.dtype
    p2, cos, sin = _match_dtypes(p, cos, sin)
    out = _RoPE.apply(p2, cos, sin, position_ids, int(offset), _mode_value(mode))
    return out.to(dtype) if out.dtype != dtype else out


def _apply_rope_cache(p, rope_cache):
    """ChatGLM: p [S, B, H, D]; the first 2*rope_cache.shape[-2] channels rotate in pairs with
    cos/sin = rope_cache[..., 0/1], the rest pass through."""
    sq = p.shape[0]
    rot_dim = rope_cache.shape[-2] * 2
    x, x_pass = p[..., :rot_dim], p[..., rot_dim:]
    cache = rope_cache[:sq].reshape(sq, -1, 1, rot_dim // 2, 2)
    cos = cache[..., 0].repeat_interleave(2, dim=-1)
    sin = cache[..., 1].repeat_interleave(2, dim=-1)
    out = _apply(x.contiguous(), cos, sin, None, 0, RotaryPosEmbeddingMode.PAIRWISE)
    return torch.cat((out, x_pass), dim=-1)


def apply_rotary_pos_emb(p, *args):
    """(p, cos, sin, position_ids=None, offset=0, mode=BLOCKWISE), or ChatGLM's (p, rope_cache)."""
    if len(args) == 1:
        return _apply_rope_cache(p, args[0])
    return _apply(p, *args)


class RotaryPosEmbeddingHelperV1:
    """HF <= 4.27.4 GPT-NeoX/LLaMA: BLOCKWISE, cos/sin sliced from offset."""

    @staticmethod
    def apply(p, cos, sin, offset):
        return _apply(p, cos, sin, None, offset, RotaryPosEmbeddingMode.BLOCKWISE)


class RotaryPosEmbeddingHelperV2:
    """HF > 4.27.4: BLOCKWISE with position_ids gathering rows of the cos/sin caches."""

    @staticmethod
    def apply(p, cos, sin, position_ids):
        return _apply(p, cos, sin, position_ids, 0, RotaryPosEmbeddingMode.BLOCKWISE)


class RotaryPosEmbeddingHelperV3:
    """ChatGLM: p [S, B, H, D] and a rope cache."""

    @staticmethod
    def apply(p, rope_cache):
        return _apply_rope_cache(p, rope_cache)
