"""Deterministic data for the reference models, all on the CPU and all without downloads.

- mlp: scikit-learn's digits (8x8, values scaled to [0, 1]);
- cnn: the same digits upscaled to 28x28 (bilinear);
- transformer: character-level next-token prediction on text that ships with Python (the
  Zen of Python from `this` and the source of a few stdlib modules), as ASCII codes.

The train/test split is fixed (independent of `seed`); `seed` only chooses the order of
the samples (mlp/cnn) or the window offsets (transformer).
"""
from __future__ import annotations

import codecs
import contextlib
import functools
import inspect
import io

import torch
import torch.nn.functional as F

from .models import REFERENCE_MODELS, SEQ_LEN, VOCAB_SIZE

Batch = tuple[torch.Tensor, torch.Tensor]

_SPLIT_SEED = 20240501  # fixes the digits train/test split once and for all
_TRAIN_FRACTION = 0.8
_TEXT_TRAIN_FRACTION = 0.9
# Stdlib modules whose source is the transformer's corpus (pure Python, present in every
# CPython; the exact text follows the running Python's version).
_TEXT_MODULES = ("textwrap", "string", "fnmatch", "bisect", "heapq")


@functools.lru_cache(maxsize=None)
def _digits(upscale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if upscale:
        x = F.interpolate(x, size=(28, 28), mode="bilinear", align_corners=False)
    return x, torch.tensor(digits.target, dtype=torch.long)


def digits_split(name: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """All samples of the fixed train or test split for 'mlp' (8x8) or 'cnn' (28x28)."""
    x, y = _digits(name == "cnn")
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(_SPLIT_SEED))
    n_train = int(_TRAIN_FRACTION * len(x))
    idx = perm[:n_train] if split == "train" else perm[n_train:]
    return x[idx], y[idx]


@functools.lru_cache(maxsize=None)
def corpus_text() -> str:
    """The transformer's text: the Zen of Python and the source of a few stdlib modules."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        import this

    parts = [codecs.decode(this.s, "rot13")]
    for mod_name in _TEXT_MODULES:
        parts.append(inspect.getsource(__import__(mod_name)))
    return "\n".join(parts)


def encode(text: str) -> torch.Tensor:
    """ASCII codes (int64); characters outside ASCII become '?'."""
    return torch.tensor([c if c < VOCAB_SIZE else ord("?") for c in map(ord, text)], dtype=torch.long)


def decode(tokens: torch.Tensor) -> str:
    return "".join(chr(int(t)) for t in tokens)


@functools.lru_cache(maxsize=None)
def text_split(split: str) -> torch.Tensor:
    tokens = encode(corpus_text())
    n_train = int(_TEXT_TRAIN_FRACTION * len(tokens))
    return tokens[:n_train] if split == "train" else tokens[n_train:]


def make_batches(name: str, batch_size: int, steps: int, seed: int = 0, split: str = "train") -> list[Batch]:
    """`steps` batches of `batch_size` (inputs, targets) CPU tensors for model `name`.

    mlp/cnn: samples of the split in a seeded random order, reshuffled every pass;
    inputs float32 (B, 1, 8, 8) or (B, 1, 28, 28), targets int64 class labels (B,).
    transformer: windows at seeded random offsets; inputs int64 (B, 64), targets the
    same windows shifted by one character."""
    if name not in REFERENCE_MODELS:
        raise ValueError(f"unknown reference model {name!r}; choose one of {REFERENCE_MODELS}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    if batch_size < 1 or steps < 0:
        raise ValueError(f"need batch_size >= 1 and steps >= 0, got {batch_size}, {steps}")
    gen = torch.Generator().manual_seed(seed)
    batches: list[Batch] = []
    if name == "transformer":
        tokens = text_split(split)
        n_windows = len(tokens) - SEQ_LEN
        for _ in range(steps):
            starts = torch.randint(0, n_windows, (batch_size,), generator=gen)
            idx = starts.unsqueeze(1) + torch.arange(SEQ_LEN + 1)
            windows = tokens[idx]
            batches.append((windows[:, :-1].contiguous(), windows[:, 1:].contiguous()))
        return batches
    x, y = digits_split(name, split)
    if batch_size > len(x):
        raise ValueError(f"batch_size {batch_size} exceeds the {len(x)} samples of split {split!r}")
    order = torch.randperm(len(x), generator=gen)
    pos = 0
    for _ in range(steps):
        if pos + batch_size > len(order):
            order = torch.randperm(len(x), generator=gen)
            pos = 0
        idx = order[pos:pos + batch_size]
        pos += batch_size
        batches.append((x[idx], y[idx]))
    return batches
