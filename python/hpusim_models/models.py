"""The reference models: an MLP and a CNN for scikit-learn's digits, and a tiny
character-level transformer language model.

Every model is built on the CPU from a seed alone (a private fork of the CPU generator, so
building a model neither depends on nor disturbs the caller's random state).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

REFERENCE_MODELS: tuple[str, ...] = ("mlp", "cnn", "transformer")

# Transformer LM hyper-parameters (character level, byte vocabulary restricted to ASCII).
VOCAB_SIZE = 128
SEQ_LEN = 64
D_MODEL = 64
N_LAYERS = 2
N_HEADS = 4
D_FF = 4 * D_MODEL
TRANSFORMER_DROPOUT = 0.1


class MLP(nn.Module):
    """Digits 8x8: Flatten, Linear 64-128, ReLU, Linear 128-64, ReLU, Linear 64-10."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64),
                                 nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    """Digits upscaled to 28x28: (conv, batch_norm, relu, max-pool) x2, linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention written out as the math path of
    F.scaled_dot_product_attention: softmax(q k^T / sqrt(d) + causal mask) v."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, max_len: int) -> None:
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        # True above the diagonal: the future positions a token must not attend to. A
        # buffer, so it moves with the model and no mask is built per step.
        mask = torch.ones(max_len, max_len, dtype=torch.bool).triu(1)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (b, h, t, hd)
        k = k.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        scores = scores.masked_fill(self.causal_mask[:t, :t], float("-inf"))
        attn = self.attn_drop(F.softmax(scores, dim=-1))
        y = (attn @ v).transpose(1, 2).reshape(b, t, c)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    """Pre-norm transformer encoder block: x + attn(ln(x)), x + mlp(ln(x)) with GELU."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, max_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, dropout, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model),
                                 nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformerLM(nn.Module):
    """Token + learned positional embedding, pre-norm causal encoder blocks, final layer
    norm and a linear head over the vocabulary; returns logits (batch, seq, vocab)."""

    def __init__(self, vocab_size: int = VOCAB_SIZE, d_model: int = D_MODEL, n_layers: int = N_LAYERS,
                 n_heads: int = N_HEADS, d_ff: int = D_FF, max_len: int = SEQ_LEN,
                 dropout: float = TRANSFORMER_DROPOUT) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff, dropout, max_len) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        # Position ids as a buffer: no arange per step.
        self.register_buffer("positions", torch.arange(max_len), persistent=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.drop(self.tok_emb(idx) + self.pos_emb(self.positions[:t]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def build(name: str, seed: int = 0, dropout: float | None = None) -> nn.Module:
    """A reference model with weights created on the CPU deterministically from `seed`.

    `dropout=None` keeps the model's default (0.1 for the transformer; the MLP and CNN have
    no dropout, so only None or 0 is accepted for them)."""
    if name not in REFERENCE_MODELS:
        raise ValueError(f"unknown reference model {name!r}; choose one of {REFERENCE_MODELS}")
    if name != "transformer" and dropout not in (None, 0, 0.0):
        raise ValueError(f"model {name!r} has no dropout layers (got dropout={dropout})")
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        if name == "mlp":
            return MLP()
        if name == "cnn":
            return CNN()
        return TinyTransformerLM(dropout=TRANSFORMER_DROPOUT if dropout is None else float(dropout))
