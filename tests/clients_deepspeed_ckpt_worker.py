"""Public DeepSpeed with gradient accumulation and a checkpoint round trip, on whichever
accelerator DS_ACCELERATOR names (hpu on hpusim, or DeepSpeed's own cpu accelerator as the
reference): ZeRO stages with bf16 train 4 steps of 2 micro-batches, save a
checkpoint, train 4 more; a fresh engine loads the checkpoint and trains the same 4 steps
again (argv[1]: the stages, e.g. 2,3). Then (hpu only) deepspeed.init_inference(model, dtype=torch.bfloat16). Prints one
JSON line. Used by tests/test_clients_deepspeed_checkpoint.py."""
import copy
import json
import os
import sys
import tempfile
import warnings

import torch

from clients_deepspeed_worker import build


def zero_round_trip(stage: int) -> dict:
    import deepspeed

    config = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "bf16": {"enabled": True},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.0, "torch_adam": True}},
              "zero_optimization": {"stage": stage}, "steps_per_print": 1000}
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 16, generator=g), torch.randn(4, 4, generator=g)) for _ in range(16)]
    # deepspeed.initialize pops keys from the optimizer's params: each engine gets its own copy.
    engine, _, _, _ = deepspeed.initialize(model=build(), model_parameters=None, config=copy.deepcopy(config))

    def micro_step(eng, x, y) -> float:
        out = eng(x.to(eng.device, torch.bfloat16))
        loss = torch.nn.functional.mse_loss(out.float(), y.to(eng.device))
        eng.backward(loss)
        eng.step()
        return loss.item()

    before = [micro_step(engine, *d) for d in data[:8]]
    with tempfile.TemporaryDirectory() as ckpt:
        engine.save_checkpoint(ckpt, tag="mid")
        after = [micro_step(engine, *d) for d in data[8:]]
        fresh, _, _, _ = deepspeed.initialize(model=build(), model_parameters=None, config=copy.deepcopy(config))
        fresh.load_checkpoint(ckpt, tag="mid")
        resumed_at = fresh.global_steps
        resumed = [micro_step(fresh, *d) for d in data[8:]]
    return {"stage": stage, "before": before, "after": after, "resumed": resumed, "resumed_at": resumed_at,
            "steps": fresh.global_steps, "device": str(next(fresh.module.parameters()).device)}


def inference() -> dict:
    import deepspeed

    model = build().eval()
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model.bfloat16()(x.bfloat16()).float()
        engine = deepspeed.init_inference(build().eval(), dtype=torch.bfloat16)
        out = engine(x.to("hpu").bfloat16())
    return {"dtype": str(out.dtype), "device": str(out.device),
            "maxdiff": (out.float().cpu() - ref).abs().max().item()}


def main() -> None:
    warnings.simplefilter("ignore")
    result = {"zero": [zero_round_trip(int(s)) for s in sys.argv[1].split(",")]}
    if os.environ.get("DS_ACCELERATOR") == "hpu":
        result["inference"] = inference()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
