"""Where a reference model's training step spends its time on hpu, op by op, against CPU.

Records the aten ops the hpu device executes during one training step of a reference model
(a TorchDispatchMode below autograd, so these are exactly the ops our lowerings receive),
then replays every distinct (op, argument shapes) on hpu and on CPU with random data of the
same shapes, dtypes and strides (integer and bool tensors keep their recorded values, so
indices and targets stay valid). Prints, per op, the time per step on each device and the
ratio, sorted by hpu time: the list of kernels worth making faster.

    .venv/bin/python bench/model_ops.py --model cnn [--top 30] [--json out.json]

`--autocast bf16` (or fp16) records the step under torch.autocast on both devices, as
train_steps(autocast_dtype=...) runs it; dtype conversions on the device (_to_copy without a
device change) are then recorded too, since autocast's casts are part of the step's cost.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import OrderedDict
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

import habana_frameworks.torch  # noqa: F401  (registers the hpu device)
from hpusim_models import build, make_batches, train_steps

from bench_training import BATCH_SIZE

# hpu-only overloads and the CPU op that computes the same thing.
_CPU_EQUIVALENT = {
    "aten.convolution_overrideable.default": "convolution",
    "aten.convolution_backward_overrideable.default": "convolution_backward",
}
_SKIP = ("aten._local_scalar_dense", "aten.empty", "aten.empty_strided", "aten.detach", "aten.view",
         "aten._unsafe_view", "aten.as_strided", "aten.t.", "aten.transpose", "aten.permute",
         "aten.expand", "aten.unsqueeze", "aten.squeeze", "aten.select", "aten.slice", "aten.alias",
         "aten._to_copy", "aten.lift_fresh", "aten.set_", "aten.resize_")


class _Spec:
    """A recorded tensor argument: its layout, plus its values when they are not floats."""

    def __init__(self, t: torch.Tensor) -> None:
        self.shape, self.stride, self.dtype = tuple(t.shape), tuple(t.stride()), t.dtype
        self.offset = t.storage_offset()
        self.values = None if t.dtype.is_floating_point else t.detach().cpu().clone()

    def key(self) -> str:
        return f"{self.dtype}{list(self.shape)}" + ("" if self._contiguous() else f"s{list(self.stride)}")

    def _contiguous(self) -> bool:
        expect, contiguous = 1, True
        for size, stride in reversed(list(zip(self.shape, self.stride))):
            if size != 1 and stride != expect:
                contiguous = False
            expect *= size
        return contiguous

    def make(self, device: str, gen: torch.Generator) -> torch.Tensor:
        if self.values is not None:
            return self.values.to(device)
        need = self.offset + sum((s - 1) * st for s, st in zip(self.shape, self.stride)) + 1 if all(self.shape) else 0
        base = torch.randn(max(need, 1), generator=gen).to(self.dtype)
        return torch.as_strided(base, self.shape, self.stride, self.offset).to(device) if device == "cpu" else \
            torch.as_strided(base.to(device), self.shape, self.stride, self.offset)


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: "OrderedDict[str, list[Any]]" = OrderedDict()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        kwargs = kwargs or {}
        name = str(func)
        if not name.startswith(_SKIP) or _same_device_copy(name, args, kwargs):
            spec_args = tree_map(lambda a: _Spec(a) if isinstance(a, torch.Tensor) else a, (args, kwargs))
            key = name + "(" + ", ".join(a.key() if isinstance(a, _Spec) else repr(a)[:40] for a in
                                         _flat(spec_args)) + ")"
            entry = self.calls.setdefault(key, [func, spec_args, 0])
            entry[2] += 1
        return func(*args, **kwargs)


def _same_device_copy(name: str, args: tuple, kwargs: dict) -> bool:
    """A dtype conversion on the device (autocast's casts), not a host<->device transfer."""
    if not name.startswith("aten._to_copy") or not args or not isinstance(args[0], torch.Tensor):
        return False
    dev = kwargs.get("device")
    return dev is None or torch.device(dev) == args[0].device


def _flat(tree: Any) -> list[Any]:
    out: list[Any] = []
    tree_map(out.append, tree)
    return out


def _cpu_func(func: Any) -> Any:
    alt = _CPU_EQUIVALENT.get(str(func))
    return getattr(torch.ops.aten, alt).default if alt else func


def _cpu_args(func: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    if str(func) == "aten.convolution_backward_overrideable.default":
        g, x, w, stride, padding, dilation, transposed, out_pad, groups, mask = args
        return (g, x, w, [w.shape[0]], stride, padding, dilation, transposed, out_pad, groups, mask), kwargs
    return args, kwargs


def _time(fn: Any, budget: float) -> float:
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    n = max(3, int(budget / one))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="cnn")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--budget", type=float, default=0.05, help="seconds per timing repeat")
    ap.add_argument("--json")
    ap.add_argument("--autocast", choices=["bf16", "fp16"], help="record the step under torch.autocast(dtype)")
    opts = ap.parse_args()
    torch.set_num_threads(2)

    model = build(opts.model)
    batches = make_batches(opts.model, BATCH_SIZE[opts.model], 2)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, None: None}[opts.autocast]
    train_steps(model, batches[:1], "hpu", autocast_dtype=autocast_dtype)
    rec = _Recorder()
    with rec:
        train_steps(model, batches[1:], "hpu", autocast_dtype=autocast_dtype)

    gen = torch.Generator().manual_seed(0)
    rows = []
    for key, (func, (args, kwargs), count) in rec.calls.items():
        def run_on(device: str) -> Any:
            a, k = tree_map(lambda s: s.make(device, gen) if isinstance(s, _Spec) else s, (args, kwargs))
            f = func
            if device == "cpu":
                f = _cpu_func(func)
                a, k = _cpu_args(func, a, k)
            return lambda: f(*a, **k)

        try:
            t_hpu = _time(run_on("hpu"), opts.budget)
            t_cpu = _time(run_on("cpu"), opts.budget)
        except Exception as e:  # an op that cannot replay on random data is reported, not fatal
            print(f"skip {key[:100]}: {type(e).__name__}: {str(e)[:80]}")
            continue
        rows.append({"op": key, "calls": count, "hpu_us": t_hpu * 1e6, "cpu_us": t_cpu * 1e6})

    rows.sort(key=lambda r: -r["hpu_us"] * r["calls"])
    tot_h = sum(r["hpu_us"] * r["calls"] for r in rows) / 1e3
    tot_c = sum(r["cpu_us"] * r["calls"] for r in rows) / 1e3
    print(f"{opts.model}{' autocast ' + opts.autocast if opts.autocast else ''}: {len(rows)} distinct ops; replayed sum per step hpu {tot_h:.1f} ms, cpu {tot_c:.1f} ms,"
          f" hpu/cpu time {tot_h / tot_c:.2f}")
    print(f"{'hpu ms/step':>11} {'cpu ms/step':>11} {'slowdown':>8} {'calls':>5}  op")
    for r in rows[:opts.top]:
        print(f"{r['hpu_us'] * r['calls'] / 1e3:11.3f} {r['cpu_us'] * r['calls'] / 1e3:11.3f} "
              f"{r['hpu_us'] / r['cpu_us']:8.1f} {r['calls']:5d}  {r['op'][:150]}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
