"""optimum-habana run unchanged on hpusim, one process per execution mode (eager or lazy is
fixed when the bridge loads). Used by tests/test_clients_optimum.py.

Plain transformers (Trainer, greedy generate) on the CPU runs first, before optimum-habana
is imported and patches transformers' model classes for Gaudi; then GaudiTrainer and
GaudiGenerationMixin run the same tiny models from the same weights on the HPU. Prints
one JSON object with the per-step losses and generated tokens of both sides."""
import json
import os
import sys
import tempfile
import warnings

import torch

STEPS = 6
BATCH = 4
SEQ = 12
VOCAB = 96


def tiny_config(family: str):
    import transformers as tr

    if family == "gpt2":
        return tr.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                             resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    if family == "bert":
        return tr.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, max_position_embeddings=64, num_labels=3,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if family == "llama":
        return tr.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    raise ValueError(family)


def model_class(family: str):
    import importlib

    # Looked up in the modeling module at each call: optimum-habana replaces the classes
    # there (transformers' top-level names keep whatever they first resolved to).
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    return getattr(module, {"gpt2": "GPT2LMHeadModel", "bert": "BertForSequenceClassification",
                            "llama": "LlamaForCausalLM"}[family])


def dataset(family: str) -> list:
    g = torch.Generator().manual_seed(7)
    rows = []
    for _ in range(STEPS * BATCH):
        ids = torch.randint(0, VOCAB, (SEQ,), generator=g)
        if family == "bert":
            label = torch.randint(0, 3, (), generator=g)
        else:
            label = ids.clone()
        rows.append({"input_ids": ids, "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": label})
    return rows


class LossLog:
    """A TrainerCallback that keeps every logged training loss."""

    def __init__(self):
        from transformers import TrainerCallback

        outer = self
        self.losses: list = []

        class _CB(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                if logs and "loss" in logs:
                    outer.losses.append(float(logs["loss"]))

        self.callback = _CB()


def common_args(out: str, bf16: bool) -> dict:
    return dict(output_dir=out, per_device_train_batch_size=BATCH, max_steps=STEPS, learning_rate=5e-3,
                logging_steps=1, save_strategy="no", report_to=[], seed=11, data_seed=11, bf16=bf16,
                max_grad_norm=1.0, dataloader_num_workers=0, disable_tqdm=True, warmup_steps=0)


def cpu_train(family: str, state: dict, bf16: bool) -> list:
    from transformers import Trainer, TrainingArguments

    model = model_class(family)(tiny_config(family))
    model.load_state_dict(state)
    log = LossLog()
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(use_cpu=True, **common_args(out, bf16))
        Trainer(model=model, args=args, train_dataset=dataset(family), callbacks=[log.callback]).train()
    return log.losses


def hpu_train(family: str, state: dict, bf16: bool, lazy: bool, fused: bool) -> list:
    from optimum.habana import GaudiConfig, GaudiTrainer, GaudiTrainingArguments

    log = LossLog()
    with tempfile.TemporaryDirectory() as out:
        args = GaudiTrainingArguments(use_habana=True, use_lazy_mode=lazy, **common_args(out, bf16))
        # Built after the arguments: they adapt transformers' classes to Gaudi first.
        model = model_class(family)(tiny_config(family))
        model.load_state_dict(state)
        gaudi_config = GaudiConfig(use_fused_adam=fused, use_fused_clip_norm=fused, use_torch_autocast=bf16)
        trainer = GaudiTrainer(model=model, gaudi_config=gaudi_config, args=args, train_dataset=dataset(family),
                               callbacks=[log.callback])
        trainer.train()
    # What the trainer really ran with: the optimizer class, the clip-norm helper, the autocast.
    opt = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    setup = {"optimizer": type(opt).__module__ + "." + type(opt).__name__,
             "clip_norm": type(getattr(trainer, "FusedNorm", None)).__name__,
             "hpu_amp": trainer.use_hpu_amp, "device": str(next(model.parameters()).device)}
    return log.losses, setup


def prompts() -> torch.Tensor:
    return torch.randint(1, VOCAB, (2, 5), generator=torch.Generator().manual_seed(3))


def cpu_generate(family: str, state: dict) -> list:
    model = model_class(family)(tiny_config(family)).eval()
    model.load_state_dict(state)
    with torch.no_grad():
        out = model.generate(prompts(), max_new_tokens=8, do_sample=False, pad_token_id=0)
    return out.tolist()


def hpu_generate(family: str, state: dict, lazy: bool, hpu_graphs: bool) -> list:
    from optimum.habana.transformers.modeling_utils import adapt_transformers_to_gaudi

    adapt_transformers_to_gaudi()
    model = model_class(family)(tiny_config(family)).eval()
    model.load_state_dict(state)
    model = model.to("hpu")
    if hpu_graphs:
        from habana_frameworks.torch.hpu import wrap_in_hpu_graph

        model = wrap_in_hpu_graph(model)
    with torch.no_grad():
        out = model.generate(prompts().to("hpu"), max_new_tokens=8, do_sample=False, pad_token_id=0,
                             lazy_mode=lazy, hpu_graphs=hpu_graphs, ignore_eos=True)
    return out.cpu().tolist()


def main() -> None:
    """argv: comma-separated jobs, each train:<family> or generate:<family>."""
    lazy = os.environ.get("PT_HPU_LAZY_MODE", "1") != "0"
    jobs = [j.split(":") for j in sys.argv[1].split(",")]
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    states = {f: model_class(f)(tiny_config(f)).state_dict() for _, f in jobs}
    result: dict = {"lazy": lazy, "train": {}, "generate": {}}
    # The CPU side first: plain transformers, before optimum-habana patches it.
    for kind, f in jobs:
        if kind == "train":
            result["train"][f] = {"cpu": cpu_train(f, states[f], bf16=False)}
        else:
            result["generate"][f] = {"cpu": cpu_generate(f, states[f])}

    import optimum.habana  # noqa: F401  (its import checks the plugin and driver versions)
    from optimum.habana.utils.misc import get_habana_frameworks_version

    result["plugin_version"] = str(get_habana_frameworks_version())

    for kind, f in jobs:
        if kind == "train":
            for name, bf16 in (("hpu", False), ("hpu_fused_bf16", True)):
                losses, setup = hpu_train(f, states[f], bf16=bf16, lazy=lazy, fused=bf16)
                result["train"][f][name] = losses
                result["train"][f][name + "_setup"] = setup
        else:
            result["generate"][f]["hpu"] = hpu_generate(f, states[f], lazy, hpu_graphs=False)
            if lazy:  # optimum-habana allows HPU graphs in lazy mode only
                result["generate"][f]["hpu_graphs"] = hpu_generate(f, states[f], lazy, hpu_graphs=True)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
