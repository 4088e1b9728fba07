"""A Lightning user's single-card script on hpusim (used by tests/test_clients_lightning_trainer.py):
lightning_habana's HPUAccelerator with `L.Trainer(accelerator="hpu", devices=1)`, ModelCheckpoint
and EarlyStopping, fit / validate / test / predict, a LightningModule that compiles its network
with backend="hpu_backend", and the best checkpoint reloaded with map_location="hpu". The same
fp32 run on Lightning's CPU accelerator is the reference. Prints one RESULT json line."""
import json
import sys
import tempfile
import warnings

import torch
import lightning as L
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint


class Net(L.LightningModule):
    def __init__(self, compile_net: bool = False):
        super().__init__()
        self.save_hyperparameters()  # the checkpoint rebuilds the same (compiled) module
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
        self.run_net = torch.compile(self.net, backend="hpu_backend") if compile_net else self.net

    def forward(self, x):
        return self.run_net(x)

    def training_step(self, batch, i):
        x, y = batch
        self.train_device = str(x.device)  # Lightning moves the module back to the CPU at teardown
        loss = torch.nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, i):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self(x), y))

    def test_step(self, batch, i):
        x, y = batch
        self.log("test_acc", (self(x).argmax(1) == y).float().mean())

    def predict_step(self, batch, i):
        return self(batch[0]).argmax(1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.5)


def run(accelerator: str, precision: str, compile_net: bool) -> dict:
    torch.manual_seed(0)
    x = torch.randn(256, 8)
    y = (x[:, 0] + x[:, 1] > 0).long()
    ds = torch.utils.data.TensorDataset(x, y)

    def loader():
        return torch.utils.data.DataLoader(ds, batch_size=32)

    out = tempfile.mkdtemp()
    ck = ModelCheckpoint(dirpath=out, monitor="val_loss", save_top_k=1)
    trainer = L.Trainer(accelerator=accelerator, devices=1, precision=precision, max_epochs=4,
                        callbacks=[ck, EarlyStopping(monitor="val_loss", patience=3)], default_root_dir=out,
                        enable_progress_bar=False, logger=False, enable_model_summary=False)
    model = Net(compile_net)
    trainer.fit(model, loader(), loader())
    res = {"best": float(ck.best_model_score), "device": model.train_device,
           "validate": trainer.validate(model, loader(), verbose=False)[0]["val_loss"],
           "test_acc": trainer.test(model, loader(), verbose=False)[0]["test_acc"]}
    preds = torch.cat(trainer.predict(model, loader()))
    res["predict"] = preds.tolist()
    reloaded = Net.load_from_checkpoint(ck.best_model_path, map_location=accelerator if accelerator == "hpu" else "cpu")
    res["reloaded_device"] = str(next(reloaded.parameters()).device)
    with torch.no_grad():
        res["reloaded_predict"] = reloaded.eval()(x.to(next(reloaded.parameters()).device)).argmax(1).cpu().tolist()
    return res


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    import lightning_habana  # noqa: F401  (registers accelerator="hpu" with Lightning)

    jobs = sys.argv[1].split(",")
    result = {}
    for job in jobs:
        acc, prec, comp = job.split(":")
        result[job] = run(acc, prec, comp == "compile")
    print("RESULT " + json.dumps(result))
