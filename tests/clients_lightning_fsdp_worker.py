"""lightning-habana's HPUFSDPStrategy on hpusim, unchanged: a small LightningModule trains for a
few steps under FSDP (one process, the hccl backend, the device given with its index as
`torch.device("hpu", 0)`), and the same model, data and SGD steps run in plain PyTorch on the
CPU in the same process as the reference. Prints one JSON line with both sides' per-step
losses and the largest difference of the trained weights (FSDP's full state dict).
Used by tests/test_clients_lightning_fsdp.py; argv[1] is the sharding strategy, argv[2] "ckpt"
turns on activation checkpointing of the Linear layers."""
import json
import sys
import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

import habana_frameworks.torch.core  # noqa: F401  (the bridge first, as lightning-habana asks)
from lightning_habana.pytorch.accelerator import HPUAccelerator
from lightning_habana.pytorch.plugins.fsdp_precision import HPUFSDPPrecision
from lightning_habana.pytorch.strategies import HPUFSDPStrategy

try:
    from lightning.pytorch import LightningModule, Trainer
except ImportError:  # the pytorch-lightning flavour of the same package
    from pytorch_lightning import LightningModule, Trainer

STEPS = 4
BATCH = 8
LR = 0.05


def build() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                               torch.nn.Tanh(), torch.nn.Linear(32, 3))


def data() -> TensorDataset:
    g = torch.Generator().manual_seed(7)
    return TensorDataset(torch.randn(STEPS * BATCH, 16, generator=g),
                         torch.randint(0, 3, (STEPS * BATCH,), generator=g))


class Classifier(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = build()
        self.losses: list = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=LR)


def cpu_reference() -> tuple:
    net = build()
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    losses = []
    for x, y in DataLoader(data(), batch_size=BATCH, shuffle=False):
        loss = torch.nn.functional.cross_entropy(net(x), y)
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return losses, {"net." + k: v for k, v in net.state_dict().items()}


def main(sharding: str, checkpointing: bool) -> None:
    warnings.filterwarnings("ignore")
    ref_losses, ref_state = cpu_reference()
    model = Classifier()
    strategy = HPUFSDPStrategy(
        parallel_devices=[torch.device("hpu", 0)],
        sharding_strategy=sharding,
        precision_plugin=HPUFSDPPrecision("32-true"),
        activation_checkpointing_policy={torch.nn.Linear} if checkpointing else None,
    )
    trainer = Trainer(accelerator=HPUAccelerator(), strategy=strategy, max_steps=STEPS, max_epochs=1,
                      num_sanity_val_steps=0, use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                      enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, DataLoader(data(), batch_size=BATCH, shuffle=False))
    state = trainer.strategy.lightning_module_state_dict()
    maxdiff = max(float((state[k].detach().cpu().float() - v).abs().max()) for k, v in ref_state.items())
    wrapped = type(trainer.strategy.model).__name__
    print("RESULT " + json.dumps({
        "losses": model.losses, "ref_losses": ref_losses, "param_maxdiff": maxdiff,
        "keys_match": sorted(state) == sorted(ref_state), "wrapped": wrapped,
        "param_device": str(next(trainer.strategy.model.parameters()).device),
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
    }), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "ckpt")
