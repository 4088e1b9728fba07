"""FusedSDPA inside optimum-habana 1.21.2: a tiny Llama through optimum's Gaudi modeling with
`use_flash_attention=True` (its ModuleFusedSDPA calls hpex FusedSDPA.apply) gives the logits,
loss and gradients of plain transformers' eager attention on the CPU, eager and lazy; with
the causal-mask (recompute, training) path and with the explicit-mask path.

Each mode runs in its own process (this file is also the worker): the execution mode is
fixed when the bridge loads and optimum-habana patches transformers' classes for good.
optimum-habana reads the plugin version from `pip list` at import; under an editable install
that line ends with a path it cannot parse (tests/test_clients_optimum.py skips then), so
the worker runs with a `pip` on PATH that prints the editable line as a regular install
does (the same name and version, without the path)."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch

VOCAB, SEQ = 64, 16


def _worker() -> None:
    import warnings

    import transformers as tr

    warnings.simplefilter("ignore")
    lazy = os.environ.get("PT_HPU_LAZY_MODE", "1") != "0"
    torch.manual_seed(0)
    cfg = tr.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         attn_implementation="eager")
    ref = tr.LlamaForCausalLM(cfg)
    state = {k: v.clone() for k, v in ref.state_dict().items()}
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(1))
    out = ref(input_ids=ids, labels=ids)
    out.loss.backward()
    ref_grads = {n: p.grad.clone() for n, p in ref.named_parameters() if "self_attn" in n}
    ref_logits = out.logits.detach()

    import optimum.habana  # noqa: F401  (its import checks the plugin version)
    from optimum.habana.transformers.modeling_utils import adapt_transformers_to_gaudi

    import habana_frameworks.torch.core as htcore
    from habana_frameworks.torch.hpex.kernels import FusedSDPA

    adapt_transformers_to_gaudi()
    calls = []
    kernel_apply = FusedSDPA.apply

    def counting_apply(*args, **kwargs):
        calls.append((tuple(args[0].shape), args[3] is not None, bool(args[5])))
        return kernel_apply(*args, **kwargs)

    FusedSDPA.apply = staticmethod(counting_apply)
    from transformers.models.llama import modeling_llama  # optimum's Gaudi class is patched in here

    result = {"lazy": lazy, "runs": {}}
    for name, causal in (("causal_recompute", True), ("mask", False)):
        model = modeling_llama.LlamaForCausalLM(cfg)
        model.load_state_dict(state)
        model = model.to("hpu")
        n0 = len(calls)
        out = model(input_ids=ids.to("hpu"), labels=ids.to("hpu"), use_flash_attention=True,
                    flash_attention_recompute=causal, flash_attention_causal_mask=causal, lazy_mode=lazy)
        out.loss.backward()
        htcore.mark_step()
        grads = {n: p.grad.cpu() for n, p in model.named_parameters() if "self_attn" in n}
        result["runs"][name] = {
            "calls": calls[n0:],
            "logits_err": (out.logits.detach().cpu().float() - ref_logits).abs().max().item(),
            "loss": [out.loss.item(), ref.forward(input_ids=ids, labels=ids).loss.item()],
            "grad_err": max((grads[n] - g).abs().max().item() / (g.abs().max().item() + 1e-12)
                            for n, g in ref_grads.items()),
        }
    print("RESULT " + json.dumps(result))


def _pip_shim(dirpath) -> str:
    """A `pip` that runs this venv's pip and prints an editable install's line as a regular
    install prints it (name and version; the editable location column dropped)."""
    shim = os.path.join(dirpath, "pip")
    with open(shim, "w") as f:
        f.write("#!/bin/sh\n"
                f'"{sys.executable}" -m pip "$@" | sed -E "s|^(habana-torch-plugin +[^ ]+) +/.*$|\\1|"\n')
    os.chmod(shim, 0o755)
    return dirpath


@pytest.mark.parametrize("mode", ["eager", "lazy"])
def test_optimum_llama_flash_attention_matches_cpu(mode, tmp_path):
    if importlib.util.find_spec("optimum") is None or importlib.util.find_spec("optimum.habana") is None:
        pytest.skip("optimum-habana is not installed (requirements.txt pins it)")
    env = dict(os.environ, PT_HPU_LAZY_MODE="1" if mode == "lazy" else "0", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env["PATH"] = _pip_shim(str(tmp_path)) + os.pathsep + os.path.dirname(sys.executable) + os.pathsep + \
        env.get("PATH", "")
    r = subprocess.run([sys.executable, os.path.abspath(__file__)], capture_output=True, text=True, env=env,
                       timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-3000:] + r.stderr[-6000:]
    res = json.loads(lines[-1][len("RESULT "):])
    assert res["lazy"] == (mode == "lazy")
    for name, run in res["runs"].items():
        # Every layer's attention went through FusedSDPA: causal without a mask, or the mask.
        assert len(run["calls"]) == 2, (name, run)
        for shape, has_mask, causal in run["calls"]:
            assert shape == [2, 4, SEQ, 8]
            assert (has_mask, causal) == ((False, True) if name == "causal_recompute" else (True, False)), run
        assert run["logits_err"] < 1e-4, (name, run)
        assert abs(run["loss"][0] - run["loss"][1]) < 1e-5, (name, run)
        assert run["grad_err"] < 1e-4, (name, run)


if __name__ == "__main__":
    _worker()
