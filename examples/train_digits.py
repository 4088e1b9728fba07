"""The main job: train one of hpusim's reference models on the emulated HPU.

By default the CNN on scikit-learn's digits (upscaled to 28x28); `--model mlp` trains the
MLP on the 8x8 digits, `--model transformer` the tiny character-level transformer language
model on text that ships with Python. The models, data and the training loop come from
`hpusim_models`; the loop is written as a Gaudi user writes it (htcore, device='hpu',
mark_step after backward and after the optimizer step). Prints the loss per epoch, the test
accuracy (for the transformer: the test loss), and the bridge's CPU-fallback and memory
figures.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import habana_frameworks.torch.core as htcore  # noqa: F401  (registers torch.hpu, as on Gaudi)
from habana_frameworks.torch.hpu import metrics
from hpusim_models import REFERENCE_MODELS, build, evaluate, make_batches, make_optimizer, train_steps
from hpusim_models.data import digits_split

DEFAULT_BATCH_SIZE = {"mlp": 64, "cnn": 64, "transformer": 16}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=REFERENCE_MODELS, default="cnn")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=None, help="default: 64 (mlp, cnn), 16 (transformer)")
    ap.add_argument("--steps-per-epoch", type=int, default=None,
                    help="default: one pass over the training split (mlp, cnn), 50 (transformer)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    name = args.model
    batch_size = args.batch_size or DEFAULT_BATCH_SIZE[name]
    if args.steps_per_epoch:
        steps_per_epoch = args.steps_per_epoch
    elif name == "transformer":
        steps_per_epoch = 50
    else:
        steps_per_epoch = len(digits_split(name, "train")[0]) // batch_size

    torch.manual_seed(args.seed)  # also seeds the hpu generator (dropout), as on Gaudi
    device = torch.device("hpu")
    batches = make_batches(name, batch_size, args.epochs * steps_per_epoch, seed=args.seed)
    if name == "transformer":
        test_batches = make_batches(name, batch_size, 8, seed=args.seed, split="test")
    else:
        n_test = len(digits_split(name, "test")[0])
        test_batches = make_batches(name, n_test, 1, seed=args.seed, split="test")

    model = build(name, seed=args.seed).to(device)
    opt = make_optimizer(model, "adamw", args.lr)
    print(f"device {torch.hpu.get_device_name()} ({device}), model {name}, "
          f"{sum(p.numel() for p in model.parameters())} parameters, "
          f"{steps_per_epoch} steps of {batch_size} per epoch")

    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        chunk = batches[epoch * steps_per_epoch:(epoch + 1) * steps_per_epoch]
        losses = train_steps(model, chunk, device, optimizer=opt)
        score = evaluate(model, test_batches, device)
        what = "test loss" if name == "transformer" else "test accuracy"
        print(f"epoch {epoch + 1:2d}  loss {statistics.fmean(losses):.4f}  {what} {score:.3f}")
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
