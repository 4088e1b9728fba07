"""torch.compile(backend="hpu_backend") for inference and mixed precision, written as users
write it (issue 16's sweep): bf16 autocast around and inside a compiled call (hpu's autocast
lists, as eager hpu autocast applies them), `model.eval()` after compiled training under
`no_grad` / `inference_mode`, a greedy generation loop with a growing KV cache, and
`torch.compile` in lazy mode (a subprocess). Compared with PyTorch on CPU and with eager hpu."""
from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from habana_frameworks.torch.utils.internal import is_lazy  # noqa: E402

pytest.importorskip("torchvision")
pytest.importorskip("transformers")
import test_model_families as fam  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(is_lazy(), reason="eager-mode sweep (the lazy case starts its own process)")


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _rel(a, b) -> float:
    a = [t.detach().cpu().double() for t in a]
    b = [t.detach().cpu().double() for t in b]
    assert len(a) == len(b)
    scale = max(float(t.abs().max()) for t in b) or 1.0
    return max(float((x - y).abs().max()) for x, y in zip(a, b)) / scale


def _autocast_step(model, x, device, where):
    m = copy.deepcopy(model).to(device)
    x = x.to(device)
    torch._dynamo.reset()
    if where == "eager":
        with torch.autocast(device, dtype=torch.bfloat16):
            out = m(x)
    elif where == "around":
        compiled = torch.compile(m, backend="hpu_backend")
        with torch.autocast(device, dtype=torch.bfloat16):
            out = compiled(x)
    else:
        def f(x):
            with torch.autocast(device, dtype=torch.bfloat16):
                return m(x)
        out = torch.compile(f, backend="hpu_backend")(x)
    out.float().pow(2).mean().backward()
    return out, [p.grad for p in m.parameters()]


@pytest.mark.parametrize("where", ["around", "inside"])
def test_autocast_bf16_compiled_casts_as_eager_hpu_autocast(where, fallback_counter):
    torch.manual_seed(0)
    model, ids = fam.bert()
    out, grads = _autocast_step(model, ids, "hpu", where)
    assert fallback_counter() == {}
    eout, egrads = _autocast_step(model, ids, "hpu", "eager")
    cout, cgrads = _autocast_step(model, ids, "cpu", "eager")
    # hpu's lists, not CPU's: the final layer_norm runs in bf16 on hpu, float32 under CPU autocast
    assert out.dtype == eout.dtype == torch.bfloat16 and cout.dtype == torch.float32
    assert [g.dtype for g in grads] == [g.dtype for g in egrads] == [p.dtype for p in model.parameters()]
    torch.testing.assert_close(out.cpu(), eout.cpu(), rtol=1.6e-2, atol=1e-2)
    assert _rel(grads, egrads) < 2e-2
    # and within bf16's reach of CPU autocast
    assert _rel([out.float()], [cout]) < 3e-2
    assert _rel(grads, cgrads) < 5e-2


def test_eval_after_compiled_training_recompiles_and_infers_as_cpu(fallback_counter):
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    model, x = fam.resnet()  # BatchNorm: train() normalises by the batch, eval() by running stats
    mh, mc = copy.deepcopy(model).to("hpu"), copy.deepcopy(model)
    counters.clear()
    compiled = torch.compile(mh, backend="hpu_backend")
    oh, oc = (torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (mh, mc))
    for _ in range(2):
        for m, f, o, xi in ((mh, compiled, oh, x.to("hpu")), (mc, mc, oc, x)):
            o.zero_grad()
            f(xi).pow(2).mean().backward()
            o.step()
    graphs = counters["stats"]["unique_graphs"]
    mh.eval()
    mc.eval()
    ref = mc(x).detach()
    with torch.no_grad():
        a = compiled(x.to("hpu"))
    assert counters["stats"]["unique_graphs"] > graphs  # the mode switch recompiled
    with torch.inference_mode():
        b = compiled(x.to("hpu"))
    assert fallback_counter() == {}
    torch.testing.assert_close(a.cpu(), ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(b.cpu(), ref, rtol=1e-4, atol=1e-5)
    for h, c in zip(mh.buffers(), mc.buffers()):  # running stats updated by the compiled steps
        torch.testing.assert_close(h.cpu(), c, rtol=1e-5, atol=1e-6)


def _greedy(lm, ids, steps, compiled):
    fwd = torch.compile(lm, backend="hpu_backend") if compiled else lm
    tokens = []
    with torch.no_grad():
        out = fwd(input_ids=ids, use_cache=True)
        for _ in range(steps):
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(nxt.cpu())
            out = fwd(input_ids=nxt, past_key_values=out.past_key_values, use_cache=True)
    return torch.cat(tokens, 1)


def test_greedy_generation_with_growing_kv_cache_compiled(fallback_counter):
    torch.manual_seed(0)
    lm = fam.gpt2()[0].m.eval()
    ids = torch.randint(0, 100, (2, 5), generator=torch.Generator().manual_seed(1))
    got = _greedy(copy.deepcopy(lm).to("hpu"), ids.to("hpu"), 8, True)
    assert fallback_counter() == {}
    assert torch.equal(got, _greedy(lm, ids, 8, False))


_LAZY_SCRIPT = r"""
import copy, sys, torch
sys.path.insert(0, sys.argv[1])
import habana_frameworks.torch.core as htcore
from habana_frameworks.torch._ops import fallback
import test_model_families as fam

def run(model, x, device, compiled):
    torch._dynamo.reset()
    m = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    f = torch.compile(m, backend="hpu_backend") if compiled else m
    for _ in range(2):
        opt.zero_grad()
        f(x.to(device)).float().pow(2).mean().backward()
        opt.step()
        htcore.mark_step()
    return [p.detach().cpu() for p in m.parameters()]

for name in ("resnet",):  # bert: swept alike
    torch.manual_seed(0)
    model, x = getattr(fam, name)()
    before = fallback.total()
    got = run(model, x, "hpu", True)
    assert fallback.total() == before, fallback.counts()
    eager = run(model, x, "hpu", False)
    cpu = run(model, x, "cpu", False)
    for g, e, c in zip(got, eager, cpu):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(g, c, rtol=1e-4, atol=1e-6)
print("ok")
"""


def test_compile_in_lazy_mode_trains_as_eager():
    # the bridge does not support hpu_backend in lazy mode; hpusim warns and runs the
    # compiled aten graphs as lazy ops (README): the same parameters as lazy eager and CPU
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PT_HPU_LAZY_MODE="1",
               ENABLE_CONSOLE="true", LOG_LEVEL_PT_PYTHON="3")
    r = subprocess.run([sys.executable, "-c", _LAZY_SCRIPT, os.path.join(ROOT, "tests")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
    assert "not supported in lazy mode" in r.stderr
