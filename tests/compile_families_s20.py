"""The families of tests/families_s19.py compiled as Gaudi 1.21+ scripts write it (issue 16,
items 3 and 6): `torch.compile(model, backend="hpu_backend")`, then forward + loss + backward
+ clip + AdamW eagerly (the MNIST train_function), and an inference call under no_grad.
Used by tests/test_compile_families_s20.py; `python tests/compile_families_s20.py FAMILY...`
runs the sweep by hand (one line per family: result, CPU fallbacks, graph breaks, seconds)."""
from __future__ import annotations

import copy
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families_s19 as fam  # noqa: E402

import habana_frameworks.torch.core as htcore  # noqa: E402
from habana_frameworks.torch._ops import fallback  # noqa: E402

FACTOR = 8.0      # hpu error may be this multiple of CPU float32's error ...
FLOOR = 3e-6      # ... or this fraction of the largest reference value, if larger


def new_fallbacks(before):
    after = fallback.counts()
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def _loss(out):
    return out.float().pow(2).mean() if out.dim() else out.float()


def _step(model, x, compiled=None, hpu=False):
    out = (compiled or model)(x)
    loss = _loss(out)
    loss.backward()
    params = [p for p in model.parameters() if p.grad is not None]
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    torch.optim.AdamW(params, lr=1e-3).step()
    if hpu:
        htcore.mark_step()
    return loss.detach(), grads


def _err(vals, ref) -> float:
    scale = max(float(r.abs().max()) for r in ref) or 1.0
    return max(float((v.double().cpu() - r).abs().max()) for v, r in zip(vals, ref)) / scale


def _f64(fn):
    torch.set_default_dtype(torch.float64)  # masks built with finfo(float64).min (CLIP, SpeechT5)
    try:
        return fn()
    finally:
        torch.set_default_dtype(torch.float32)


def _dbl(x):
    return x.double() if x.is_floating_point() else x


def graph_stats():
    from torch._dynamo.utils import counters
    return sum(counters["graph_break"].values()), int(counters["stats"].get("unique_graphs", 0))


def strided(x):
    """x with the same shape and values, as a non-dense slice (every second element of a
    tensor twice as wide in its last dim): a batch sliced out of a bigger buffer."""
    return torch.stack([x, torch.zeros_like(x)], -1)[..., 0]


def transposed(x):
    """x with the same shape and values, its first and last dims transposed in memory."""
    return x.transpose(0, -1).contiguous().transpose(0, -1)


def channels_last_input(x):
    """x with the same shape and values in channels_last memory (an image batch from a
    channels_last pipeline fed to a model in the default layout)."""
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def dynamic_dim(x):
    """x marked dynamic (torch._dynamo.mark_dynamic) in its sequence dim (token ids) or its
    batch dim, as users mark an input whose size will change."""
    torch._dynamo.mark_dynamic(x, 0 if x.is_floating_point() else 1)
    return x


def shorter(x):
    """A second input shape of the same family: a sequence two tokens shorter (token ids),
    else a batch one sample smaller."""
    return x[:, :-2] if not x.is_floating_point() else x[:-1]


def train_case(family, layout=None, backend="hpu_backend", *, feed=None, compile_kw=None, resize=None):
    """One compiled training step on hpu judged against float64 (and CPU float32's own
    distance from it), then a compiled no_grad inference call on the updated weights.
    feed(x) makes the hpu batch (a non-contiguous one: strided, transposed); compile_kw goes
    to torch.compile (dynamic=True, mode=...); resize(x) gives a second input shape, trained
    and judged in a second step. Returns (graph breaks, graphs) of dynamo."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model, x, kind = fam.BUILDERS[family]()
    assert kind == "train"
    model.train()
    if layout is not None:
        model, x = model.to(memory_format=layout), x.contiguous(memory_format=layout)
    m64, m32 = copy.deepcopy(model).double(), copy.deepcopy(model)
    dev = "hpu" if backend == "hpu_backend" else "cpu"
    mh = copy.deepcopy(model).to(dev)
    feed = feed or (lambda t: t)
    before = fallback.counts()
    ch = torch.compile(mh, backend=backend, **(compile_kw or {}))
    for xi in [x] if resize is None else [x, resize(x)]:
        l64, g64 = _f64(lambda: _step(m64, _dbl(xi)))
        l32, g32 = _step(m32, xi)
        e32 = _err(list(g32.values()), list(g64.values()))
        lh, gh = _step(mh, feed(xi.to(dev)), ch, hpu=dev == "hpu")
        lh = float(lh.cpu())
        gh = {n: g.cpu() for n, g in gh.items()}
        # AOT autograd gives parameters that get no gradient in eager (GoogLeNet's unused aux
        # heads' ...) a zero gradient: those must be zero
        for n in set(gh) ^ set(g64):
            assert n in gh and not gh[n].any(), (family, n, "gradient only in " + ("compiled" if n in gh else "eager"))
        eh = _err([gh[n] for n in g64], list(g64.values()))
        shape = tuple(xi.shape)
        assert eh <= max(FACTOR * e32, FLOOR), f"{family} {shape}: compiled grads {eh:.2e} from float64, CPU float32 {e32:.2e}"
        ref = float(l64)
        assert abs(lh - ref) <= max(FACTOR * abs(float(l32) - ref), FLOOR * abs(ref) + 1e-7), (family, shape, lh, ref)
        for p, q in zip(mh.parameters(), m32.parameters()):
            assert p.device.type == dev, (family, p.device)
            torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=0, atol=2.1e-3)
    # inference on the stepped weights (CPU float64 copy stepped alike), compiled under no_grad
    mh.eval(), m64.eval(), m32.eval()
    with torch.no_grad():
        o64 = _f64(lambda: m64(_dbl(x)))
        o32 = m32(x)
        oh = ch(feed(x.to(dev)))
        if dev == "hpu":
            htcore.mark_step()
        if torch.is_tensor(o64) and o64.is_floating_point():
            e32 = _err([o32], [o64])
            eh = _err([oh.cpu()], [o64])
            assert eh <= max(FACTOR * e32, FLOOR), f"{family}: compiled eval {eh:.2e} from float64, CPU {e32:.2e}"
    fb = new_fallbacks(before)
    assert fb == {}, f"{family}: CPU fallbacks {fb}"
    return graph_stats()


LM_GENERATE = ["opt", "mistral", "qwen2", "gemma", "phi3", "gpt_neox", "falcon", "stablelm"]


def lm(family):
    """The Hugging Face causal LM inside a family builder (its Out wrapper or the model)."""
    torch.manual_seed(0)
    model, x, _ = fam.BUILDERS[family]()
    inner = getattr(model, "m", model)
    return inner.eval(), x


def generate_case(family, new_tokens=6, compile_kw=None):
    """Greedy generate() with the model's forward compiled (as users do: model.forward =
    torch.compile(model.forward, ...) or torch.compile(model) then .generate on the module):
    the same tokens as CPU eager. compile_kw goes to torch.compile (dynamic=True: one graph
    for every sequence length)."""
    torch._dynamo.reset()
    model, ids = lm(family)
    ids = ids[:, :6]
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # left padding in the first row
    kw = dict(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        ref = model.generate(ids, attention_mask=mask, **kw)
        mh = copy.deepcopy(model).to("hpu")
        mh.forward = torch.compile(mh.forward, backend="hpu_backend", **(compile_kw or {}))
        before = fallback.counts()
        out = mh.generate(ids.to("hpu"), attention_mask=mask.to("hpu"), **kw).cpu()
    fb = new_fallbacks(before)
    assert fb == {}, f"{family}: CPU fallbacks {fb}"
    assert torch.equal(out, ref), (family, out, ref)
    return graph_stats()


def main(argv):
    layout = None
    names = []
    kw = {}
    for a in argv:
        if a == "--cl":
            layout = torch.channels_last
        elif a == "--strided":
            kw["feed"] = strided
        elif a == "--transposed":
            kw["feed"] = transposed
        elif a == "--dynamic":
            kw["compile_kw"], kw["resize"] = dict(dynamic=True), shorter
        elif a == "--cl-input":
            kw["feed"] = channels_last_input
        elif a == "--mark-dynamic":
            kw["feed"], kw["resize"] = dynamic_dim, shorter
        elif a == "--resize":
            kw["resize"] = shorter
        elif a == "--reduce-overhead":
            kw["compile_kw"] = dict(mode="reduce-overhead")
        else:
            names.append(a)
    for name in names:
        t = time.time()
        try:
            if name.startswith("gen:"):
                res = generate_case(name[4:], compile_kw=kw.get("compile_kw"))
            elif layout is not None and name == "mvit":
                res = train_case(name, torch.channels_last_3d, **kw)
            else:
                res = train_case(name, layout, **kw)
            msg = f"PASS breaks={res[0]} graphs={res[1]}"
        except Exception as e:  # noqa: BLE001  (the hand sweep records every failure)
            msg = "FAIL " + type(e).__name__ + ": " + str(e).replace("\n", " | ")[:600]
        flags = "".join(" " + a for a in argv if a.startswith("--"))
        print(f"{name}{flags}\t{time.time() - t:.1f}s\t{msg}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
