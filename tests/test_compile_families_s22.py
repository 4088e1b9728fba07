"""torch.compile(backend="hpu_backend") as users write it around real models (issue 16, items 3
and 6), small and fast: the variants of the families sweep (tests/compile_families_s20.py
--strided/--transposed/--cl-input/--dynamic/--mark-dynamic/--resize/--reduce-overhead) on a
tiny conv net and a tiny attention block, and tuple subclasses through a compiled region
(torch.return_types of max/topk/sort, namedtuples, Hugging Face ModelOutput), forward and
backward, against CPU eager (float32 tight)."""
from __future__ import annotations

import collections
import copy
import os
import subprocess
import sys

import pytest
import torch

import habana_frameworks.torch.core  # noqa: F401  (registers hpu and hpu_backend)
from habana_frameworks.torch.utils.internal import is_lazy

pytestmark = pytest.mark.skipif(is_lazy(), reason="eager-mode file; lazy mode: test_variants_in_lazy_mode")

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = torch.nn.functional.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.mean((2, 3)))


class Attn(torch.nn.Module):
    """Token ids -> embedding -> one self-attention block (head split by view/transpose) -> logits."""

    def __init__(self, vocab=50, d=16, heads=2):
        super().__init__()
        self.emb, self.heads = torch.nn.Embedding(vocab, d), heads
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ln, self.head = torch.nn.LayerNorm(d), torch.nn.Linear(d, vocab)

    def forward(self, ids):
        h = self.emb(ids)
        b, s, d = h.shape
        q, k, v = self.qkv(h).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = self.ln(h + self.o(a.transpose(1, 2).reshape(b, s, d)))
        return self.head(h)


def _strided(x):
    return torch.stack([x, torch.zeros_like(x)], -1)[..., 0]


def _transposed(x):
    return x.transpose(0, -1).contiguous().transpose(0, -1)


def _channels_last(x):
    return x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x


def _shorter(x):
    return x[:, :-2] if not x.is_floating_point() else x[:-1]


def _mark(x):
    torch._dynamo.mark_dynamic(x, 0 if x.is_floating_point() else 1)
    return x


def _make(kind):
    g = torch.Generator().manual_seed(0)
    if kind == "conv":
        torch.manual_seed(0)
        return ConvNet(), torch.randn(3, 3, 12, 12, generator=g)
    torch.manual_seed(0)
    return Attn(), torch.randint(0, 50, (2, 9), generator=g)


def _train_and_eval(kind, feed=lambda t: t, resize=None, **compile_kw):
    """Two training steps (forward, loss, backward, SGD) compiled on hpu vs CPU eager (a second
    input shape in the second step when resize is given), then a no_grad eval call."""
    model, x = _make(kind)
    mh = copy.deepcopy(model).to("hpu")
    ch = torch.compile(mh, backend="hpu_backend", **compile_kw)
    opt_c, opt_h = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(mh.parameters(), lr=0.1)
    for xi in [x, x if resize is None else resize(x)]:
        out_c = model(xi)
        out_h = ch(feed(xi.to("hpu")))
        torch.testing.assert_close(out_h.cpu(), out_c, **TOL)
        out_c.pow(2).mean().backward()
        out_h.pow(2).mean().backward()
        for (n, p), q in zip(model.named_parameters(), mh.parameters()):
            torch.testing.assert_close(q.grad.cpu(), p.grad, **TOL, msg=lambda m: f"{n}: {m}")
        opt_c.step(), opt_h.step(), opt_c.zero_grad(), opt_h.zero_grad()
    for b_c, b_h in zip(model.buffers(), mh.buffers()):
        torch.testing.assert_close(b_h.cpu(), b_c, **TOL)
    model.eval(), mh.eval()
    with torch.no_grad():
        torch.testing.assert_close(ch(feed(x.to("hpu"))).cpu(), model(x), **TOL)


VARIANTS = {
    "strided": dict(feed=_strided),
    "transposed": dict(feed=_transposed),
    "channels_last_input": dict(feed=_channels_last),
    "dynamic": dict(resize=_shorter, dynamic=True),
    "mark_dynamic": dict(feed=_mark, resize=_shorter),
    "resize": dict(resize=_shorter),
    "reduce_overhead": dict(mode="reduce-overhead"),
}


@pytest.mark.parametrize("kind", ["conv", "attn"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_trains_compiled(kind, variant):
    if kind == "attn" and variant == "channels_last_input":
        pytest.skip("token ids have no channels")
    _train_and_eval(kind, **VARIANTS[variant])


NT = collections.namedtuple("NT", "a b")

STRUCTS = {
    "max_dim": lambda x: torch.max(x * 2, 1),
    "min_keepdim": lambda x: x.min(1, keepdim=True),
    "topk": lambda x: (x + 1).topk(2),
    "sort": lambda x: x.sort(dim=0, descending=True),
    "kthvalue": lambda x: x.kthvalue(2, 1),
    "cummax": lambda x: torch.cummax(x, 1),
    "median": lambda x: torch.median(x.exp(), 0),
    "namedtuple": lambda x: NT(x + 1, x.sum(0)),
    "nested": lambda x: (x.max(0), NT(x.topk(1, 1), [x.sort(1)]), {"v": x.min(1).values}),
}


def _check(out, ref):
    assert type(out) is type(ref), (type(out), type(ref))
    if isinstance(ref, torch.Tensor):
        torch.testing.assert_close(out.cpu(), ref, **TOL)
        assert out.device.type == "hpu"
    elif isinstance(ref, dict):
        assert list(out) == list(ref)
        for k in ref:
            _check(out[k], ref[k])
    else:
        assert len(out) == len(ref)
        for a, b in zip(out, ref):
            _check(a, b)


def _leaves(out):
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    vals = out.values() if isinstance(out, dict) else out
    return [t for v in vals for t in _leaves(v)]


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_tuple_subclass_outputs(name):
    """A compiled region returning torch.return_types / namedtuples gives the same types and
    values as eager, and gradients flow through their float members."""
    fn = STRUCTS[name]
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    xc, xh = x.clone().requires_grad_(), x.to("hpu").requires_grad_()
    ref = fn(xc)
    out = torch.compile(fn, backend="hpu_backend")(xh)
    _check(out, ref)
    sum(t.pow(2).sum() for t in _leaves(ref)).backward()
    sum(t.pow(2).sum() for t in _leaves(out)).backward()
    torch.testing.assert_close(xh.grad.cpu(), xc.grad, **TOL)
    with torch.no_grad():  # the inference graph too
        torch._dynamo.reset()
        _check(torch.compile(fn, backend="hpu_backend")(x.to("hpu")), fn(x))


def test_model_output_through_compiled_region():
    """Hugging Face ModelOutput (an OrderedDict dataclass) returned by and passed into compiled
    functions; its loss backpropagates."""
    mo = pytest.importorskip("transformers.modeling_outputs")

    def head(x, w):
        logits = x @ w
        return mo.CausalLMOutputWithPast(loss=logits.logsumexp(-1).mean(), logits=logits)

    def reuse(o):
        return o.logits.softmax(-1), o[0] * 2

    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(4, 8, generator=g), torch.randn(8, 3, generator=g)
    wc, wh = w.clone().requires_grad_(), w.to("hpu").requires_grad_()
    ref = head(x, wc)
    out = torch.compile(head, backend="hpu_backend")(x.to("hpu"), wh)
    assert type(out) is type(ref) and list(out.keys()) == list(ref.keys())
    torch.testing.assert_close(out.logits.cpu(), ref.logits, **TOL)
    out.loss.backward(), ref.loss.backward()
    torch.testing.assert_close(wh.grad.cpu(), wc.grad, **TOL)
    r2 = torch.compile(reuse, backend="hpu_backend")(out)
    e2 = reuse(ref)
    for a, b in zip(r2, e2):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), **TOL)


def test_variants_in_lazy_mode():
    """A strided input to a compiled model and return_types/namedtuple outputs, as a
    lazy-mode script runs them (PT_HPU_LAZY_MODE=1 is read at import: a subprocess)."""
    env = dict(os.environ, PT_HPU_LAZY_MODE="1")
    code = ("import sys; sys.path.insert(0, %r); import test_compile_families_s22 as t; "
            "from habana_frameworks.torch.utils.internal import is_lazy; assert is_lazy(); import torch; "
            "t._train_and_eval('conv', feed=t._strided); torch._dynamo.reset(); "
            "x = torch.randn(5, 6); f = t.STRUCTS['nested']; "
            "t._check(torch.compile(f, backend='hpu_backend')(x.to('hpu')), f(x)); print('ok')"
            ) % os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-2000:] + r.stderr[-4000:]
