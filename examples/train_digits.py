"""The main job: train a classifier on scikit-learn's digits on the emulated HPU.

Written as a Gaudi user writes it (htcore, device='hpu', mark_step after backward and
after the optimizer step); prints the loss per epoch, test accuracy, and the bridge's
CPU-fallback and memory figures.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

import habana_frameworks.torch.core as htcore
from habana_frameworks.torch.hpu import metrics


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64),
                                 nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN(nn.Module):
    """Digits upscaled to 28x28: conv, batch_norm, relu, pool."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def load(model: str) -> tuple[torch.Tensor, torch.Tensor]:
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if model == "cnn":
        x = F.interpolate(x, size=(28, 28), mode="bilinear", align_corners=False)
    return x, torch.tensor(digits.target, dtype=torch.long)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=("mlp", "cnn"), default="cnn")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device("hpu")
    x, y = load(args.model)
    perm = torch.randperm(len(x))
    split = int(0.8 * len(x))
    train = torch.utils.data.TensorDataset(x[perm[:split]], y[perm[:split]])
    test_x, test_y = x[perm[split:]].to(device), y[perm[split:]].to(device)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, shuffle=True)

    model = (MLP() if args.model == "mlp" else CNN()).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    print(f"device {torch.hpu.get_device_name()} ({device}), model {args.model}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, {len(train)} training samples")

    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        total, n = 0.0, 0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            htcore.mark_step()
            opt.step()
            htcore.mark_step()
            total += loss.item() * len(xb)
            n += len(xb)
        model.eval()
        with torch.no_grad():
            acc = (model(test_x).argmax(1) == test_y).float().mean().item()
        print(f"epoch {epoch + 1:2d}  loss {total / n:.4f}  test accuracy {acc:.3f}")
    elapsed = time.perf_counter() - t0

    fb = dict(metrics.metric_global("cpu_fallback").stats())
    mem = torch.hpu.memory_stats()
    print(f"trained {args.epochs} epochs in {elapsed:.1f}s")
    print(f"cpu_fallback TotalNumber {fb['TotalNumber']}")
    for op, count in sorted(fb["FallbackOps"].items(), key=lambda kv: -kv[1]):
        print(f"  {count:8d}  {op}")
    print(f"memory InUse {mem['InUse']} MaxInUse {mem['MaxInUse']} NumAllocs {mem['NumAllocs']} "
          f"NumFrees {mem['NumFrees']} Limit {mem['Limit']}")


if __name__ == "__main__":
    main()
