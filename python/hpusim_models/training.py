"""A training loop written the way Gaudi scripts are (htcore.mark_step after backward and
after the optimizer step), usable on any device, and an evaluation helper."""
from __future__ import annotations

import contextlib
from typing import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from .data import Batch
from .models import TinyTransformerLM

_OPTIMIZERS = {
    "adamw": torch.optim.AdamW,
    "adam": torch.optim.Adam,
    "sgd": torch.optim.SGD,
}


def loss_fn(model: nn.Module, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross entropy over classes (mlp/cnn) or over next characters (transformer)."""
    if isinstance(model, TinyTransformerLM):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return F.cross_entropy(logits, targets)


def _mark_step_fn(device: torch.device, mark_step: bool):
    if device.type != "hpu" or not mark_step:
        return lambda: None
    import habana_frameworks.torch.core as htcore

    return htcore.mark_step


def _autocast(device: torch.device, dtype: torch.dtype | None):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_optimizer(model: nn.Module, optimizer: str, lr: float) -> torch.optim.Optimizer:
    try:
        cls = _OPTIMIZERS[optimizer.lower()]
    except KeyError:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {tuple(_OPTIMIZERS)}") from None
    return cls(model.parameters(), lr=lr)


def train_steps(model: nn.Module, batches: Sequence[Batch], device: str | torch.device, lr: float = 1e-3,
                optimizer: str | torch.optim.Optimizer = "adamw", autocast_dtype: torch.dtype | None = None,
                mark_step: bool = True) -> list[float]:
    """Move `model` to `device` and take one optimizer step per batch; returns the losses.

    The forward and the loss run under torch.autocast(device type, autocast_dtype) when
    autocast_dtype is given. On hpu, htcore.mark_step() follows backward and
    optimizer.step() when `mark_step` is true. `optimizer` is a name ('adamw', 'adam',
    'sgd'; created over model.parameters() after the move) or an optimizer already built
    over the moved model's parameters (to continue training across calls)."""
    dev = torch.device(device)
    model.to(dev)
    model.train()
    opt = make_optimizer(model, optimizer, lr) if isinstance(optimizer, str) else optimizer
    step_marker = _mark_step_fn(dev, mark_step)
    losses: list[float] = []
    for inputs, targets in batches:
        inputs, targets = inputs.to(dev), targets.to(dev)
        opt.zero_grad(set_to_none=True)
        with _autocast(dev, autocast_dtype):
            loss = loss_fn(model, model(inputs), targets)
        loss.backward()
        step_marker()
        opt.step()
        step_marker()
        losses.append(loss.item())
    return losses


def evaluate(model: nn.Module, batches: Sequence[Batch], device: str | torch.device) -> float:
    """Accuracy over `batches` for the classifiers (mlp/cnn); mean per-batch loss for the
    transformer LM. Runs in eval mode without gradients and restores the previous mode."""
    dev = torch.device(device)
    model.to(dev)
    was_training = model.training
    model.eval()
    lm = isinstance(model, TinyTransformerLM)
    total, count = 0.0, 0
    try:
        with torch.no_grad():
            for inputs, targets in batches:
                inputs, targets = inputs.to(dev), targets.to(dev)
                logits = model(inputs)
                if lm:
                    total += loss_fn(model, logits, targets).item()
                    count += 1
                else:
                    total += (logits.argmax(1) == targets).float().sum().item()
                    count += len(targets)
    finally:
        model.train(was_training)
    return total / max(count, 1)
