"""Public DeepSpeed on hpusim, unchanged: its HPU accelerator (DS_ACCELERATOR=hpu) drives a
tiny MLP through ZeRO stage 1, 2 or 3 with bf16, and the same model, data and optimizer are
trained by plain PyTorch on the CPU in the same process as the reference. One rank per process
(RANK/WORLD_SIZE/MASTER_* from the environment; the hccl backend). Prints one JSON line with
the per-step losses of both sides and the largest difference of the fp32 master weights.
Used by tests/test_clients_deepspeed.py."""
import json
import os
import sys
import warnings

import torch

STEPS = 5
BATCH = 8  # per rank
LR = 1e-2


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.Tanh(), torch.nn.Linear(32, 4))


def batches(world: int) -> list:
    g = torch.Generator().manual_seed(5)
    return [(torch.randn(BATCH * world, 16, generator=g), torch.randn(BATCH * world, 4, generator=g))
            for _ in range(STEPS)]


def cpu_reference(world: int) -> tuple:
    """Plain PyTorch doing what DeepSpeed's bf16 mode does: the bf16 model runs forward and
    backward on each rank's share of the batch, the ranks' gradients are averaged in bf16,
    fp32 master weights take AdamW's step and are copied back."""
    model = build().bfloat16()
    # DeepSpeed makes its fp32 masters from the bf16 module it was handed.
    master = [p.detach().float().requires_grad_() for p in model.parameters()]
    opt = torch.optim.AdamW(master, lr=LR, weight_decay=0.0)
    losses = []
    for x, y in batches(world):
        reduced = [torch.zeros_like(p) for p in model.parameters()]
        total = 0.0
        for r in range(world):
            share = slice(r * BATCH, (r + 1) * BATCH)
            loss = torch.nn.functional.mse_loss(model(x[share].bfloat16()).float(), y[share])
            model.zero_grad()
            loss.backward()
            # ZeRO averages the bf16 gradients in bf16: each rank divides, then they are summed.
            for acc, p in zip(reduced, model.parameters()):
                acc += p.grad / world
            total += loss.item() / world
        for m, g in zip(master, reduced):
            m.grad = g.float()
        opt.step()
        with torch.no_grad():
            for m, p in zip(master, model.parameters()):
                p.copy_(m)
        losses.append(total)
    return losses, [m.detach().clone() for m in master]


def train(stage: int, rank: int, world: int) -> dict:
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from deepspeed.utils import safe_get_full_fp32_param

    ref_losses, ref_params = cpu_reference(world)
    config = {
        "train_micro_batch_size_per_gpu": BATCH,
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True},
        "optimizer": {"type": "AdamW", "params": {"lr": LR, "weight_decay": 0.0, "torch_adam": True}},
        "zero_optimization": {"stage": stage},
        "steps_per_print": 1000,
    }
    engine, _, _, _ = deepspeed.initialize(model=build(), model_parameters=None, config=config)
    losses = []
    for x, y in batches(world):
        x, y = x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]
        out = engine(x.to(engine.device, torch.bfloat16))
        loss = torch.nn.functional.mse_loss(out.float(), y.to(engine.device))
        engine.backward(loss)
        engine.step()
        # The global batch's loss: the ranks' means over their equal shares, averaged.
        g = loss.detach().clone()
        torch.distributed.all_reduce(g)
        losses.append(g.item() / world)
    # The fp32 master weights, gathered from the ranks' partitions.
    masters = [safe_get_full_fp32_param(p).detach().cpu().float() for p in engine.module.parameters()]
    param = next(engine.module.parameters())
    return {"rank": rank, "world": world, "stage": stage, "accelerator": get_accelerator().device_name(),
            "backend": torch.distributed.get_backend(), "param_device": str(param.device),
            "param_dtype": str(param.dtype), "optimizer": type(engine.optimizer).__name__,
            "losses": losses, "ref_losses": ref_losses,
            "param_maxdiff": max((a - b).abs().max().item() for a, b in zip(masters, ref_params))}


def main() -> None:
    """argv[1]: the ZeRO stages to run one after the other, e.g. 1,2,3."""
    warnings.simplefilter("ignore")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    results = [train(int(stage), rank, world) for stage in sys.argv[1].split(",")]
    print("RESULT " + json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
