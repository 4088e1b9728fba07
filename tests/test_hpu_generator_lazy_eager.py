"""Lazy and eager mode draw the same random numbers for the same seed.

hpu random ops draw a Philox (seed, offset) pair from their generator when they are called:
eagerly as they run, in lazy mode as they are recorded (a recipe replayed from the cache draws
its ops' pairs in record order at launch). Either way the n-th random op of a process gets the
n-th pair, so dropout masks, rand/randn/bernoulli are bitwise equal between the modes for one
`torch.manual_seed` / `torch.hpu.manual_seed` and for an explicit `torch.Generator("hpu")`.

A process that never seeds the hpu generator starts it, as the bridge's createHPUGenerator,
from the CPU default generator's seed, which torch picks at random per process: two such
processes (whatever their modes) draw different numbers, as on Gaudi and as on the CPU.
"""
import hashlib
import json
import os
import subprocess
import sys

SCRIPT = r"""
import hashlib, json, torch
import torch.nn.functional as F
import habana_frameworks.torch.core as htcore

def h(t):
    return hashlib.sha1(t.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]

def ops(gen=None):
    ones = torch.ones(64, 33, device="hpu")
    return [
        F.dropout(ones, 0.3, training=True) if gen is None else ones,
        torch.rand(257, device="hpu", generator=gen),
        torch.randn(5, 7, device="hpu", generator=gen),
        torch.bernoulli(torch.full((300,), 0.4, device="hpu"), generator=gen),
        torch.empty(100, device="hpu").uniform_(-2, 3, generator=gen),
    ]

out = {"initial": [torch.initial_seed(), torch.hpu.initial_seed()]}
torch.manual_seed(0)
a = ops()
htcore.mark_step()
torch.hpu.manual_seed(5)
b = ops()
htcore.mark_step()
g = torch.Generator(device="hpu")
g.manual_seed(9)
c = ops(g) + ops(g)  # two batches from one generator: the second continues the first
htcore.mark_step()
out["ops"] = [h(t) for t in a + b + c]

# A training loop with dropout inside recorded graphs (forward, backward, step), three steps:
# the cached recipe of steps 2 and 3 draws fresh pairs at each launch.
torch.manual_seed(1)
net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                          torch.nn.Linear(32, 4)).to("hpu")
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(8, 16).to("hpu")
losses = []
for _ in range(3):
    opt.zero_grad(set_to_none=True)
    loss = net(x).square().mean()
    loss.backward()
    htcore.mark_step()
    opt.step()
    htcore.mark_step()
    losses.append(loss.item().hex())
out["losses"] = losses
out["weights"] = h(torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
print("OUT", json.dumps(out))
"""


def _run(lazy: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PT_HPU_")}
    env["PT_HPU_LAZY_MODE"] = "1" if lazy else "0"
    p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-4000:]
    return json.loads(p.stdout.split("OUT ", 1)[1])


def test_lazy_and_eager_draw_the_same_numbers_for_a_seed():
    eager, lazy = _run(False), _run(True)
    assert eager["ops"] == lazy["ops"]
    assert eager["losses"] == lazy["losses"] and eager["weights"] == lazy["weights"]
    # Not vacuous: the masks and numbers differ between the seeds and between the batches of
    # one generator, and dropout ran (the losses are not those of an identity).
    n = len(eager["ops"]) // 4
    a, b, c1, c2 = (eager["ops"][i * n:(i + 1) * n] for i in range(4))
    assert all(x != y for x, y in zip(a, b)) and all(x != y for x, y in zip(c1[1:], c2[1:]))
    assert len(set(eager["losses"])) == 3
    # Unseeded processes start from the CPU default's (random) seed, as the bridge's generator.
    for r in (eager, lazy):
        assert r["initial"][0] == r["initial"][1]
    assert eager["initial"] != lazy["initial"]


def test_dropout_mask_follows_the_hpu_generator_in_process():
    # In this process (the mode of the pytest run): the same seed gives the same mask again,
    # another seed another mask, and the mask keeps about 1 - p of the elements, scaled.
    import torch
    import torch.nn.functional as F
    import habana_frameworks.torch.core as htcore

    def mask(seed):
        torch.hpu.manual_seed(seed)
        y = F.dropout(torch.ones(4096, device="hpu"), 0.25, training=True)
        htcore.mark_step()
        return y.cpu()

    m1, m2, m3 = mask(3), mask(3), mask(4)
    assert torch.equal(m1, m2) and not torch.equal(m1, m3)
    kept = m1 != 0
    assert torch.all(m1[kept] == 1 / 0.75)
    assert abs(kept.float().mean().item() - 0.75) < 0.03
    assert hashlib.sha1(m1.numpy().tobytes()).hexdigest() == hashlib.sha1(m2.numpy().tobytes()).hexdigest()
