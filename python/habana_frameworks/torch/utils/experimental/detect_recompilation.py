"""Which modules make the device recompile, and on which inputs.

`detect_recompilation_auto_model(model)` hooks every submodule; `model.analyse_dynamicity()`
prints and writes two tables: every module call that recompiled (`<csv_out>_1.csv`) and the
recompile count per module (`<csv_out>_2.csv`).

In lazy mode a call "recompiled" when the lazy engine's graph_compilation counter grew while
the module ran: the hooks launch the graph before and after each module (a mark_step), so
each module's ops form their own graphs and the counter delta is that module's compilations.
In eager mode hpusim compiles nothing, while the bridge compiles one recipe per op and input
shape; there a call counts as a recompile when the module sees input shapes it has not seen
before, which is when the bridge's eager recipe cache would miss.
"""
from __future__ import annotations

import csv
import time
from typing import Any

import torch

from ... import _lazy
from ..internal import is_lazy


def _shapes(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return tuple(_shapes(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _shapes(v)) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])))
    return None


def _compilations() -> int:
    return int(_lazy.stats()["compilations"])


class _Recorder:
    def __init__(self, waittime: float, csv_out: str):
        self.waittime = waittime
        self.csv_out = csv_out
        self.step = 0
        self.rows: list[dict[str, Any]] = []
        self.calls: dict[str, int] = {}
        self.recompiles: dict[str, int] = {}
        self.classes: dict[str, str] = {}
        self.seen: dict[str, set] = {}
        self.started: dict[int, tuple[int, Any]] = {}

    def pre(self, name: str, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        shapes = (_shapes(args), _shapes(kwargs))
        before = 0
        if is_lazy():
            _lazy.step(wait=True, reason="detect_recompilation")
            if self.waittime:
                time.sleep(self.waittime)
            before = _compilations()
        self.started[id(module)] = (before, shapes)

    def post(self, name: str, module: torch.nn.Module) -> None:
        before, shapes = self.started.pop(id(module), (0, None))
        seen = self.seen.setdefault(name, set())
        new_shapes = shapes not in seen
        seen.add(shapes)
        if is_lazy():
            _lazy.step(wait=True, reason="detect_recompilation")
            recompiled = _compilations() > before
        else:
            recompiled = new_shapes
        self.calls[name] = self.calls.get(name, 0) + 1
        self.classes[name] = type(module).__name__
        if recompiled:
            self.recompiles[name] = self.recompiles.get(name, 0) + 1
            self.rows.append({"Step": self.step, "Module name": name or "(root)",
                              "Class": type(module).__name__, "Input shapes": str(shapes),
                              "New input shapes": new_shapes})
        if not name:  # the root module finished: one step of the model
            self.step += 1

    def write(self) -> tuple[str, str]:
        detail, summary = f"{self.csv_out}_1.csv", f"{self.csv_out}_2.csv"
        with open(detail, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, ["Step", "Module name", "Class", "Input shapes", "New input shapes"])
            w.writeheader()
            w.writerows(self.rows)
        with open(summary, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["Module name", "Class", "Recompile count", "Total call count", "Recompile %"])
            for name, calls in self.calls.items():
                n = self.recompiles.get(name, 0)
                w.writerow([name or "(root)", self.classes[name], n, calls, f"{100.0 * n / calls:.1f}"])
        return detail, summary


def detect_recompilation_auto_model(model: torch.nn.Module, waittime: float = 0.3,
                                    csv_out: str = "recompilation_report.csv") -> torch.nn.Module:
    """Hook every submodule of `model` (in place) and give it `analyse_dynamicity()`.

    Returns the same model, so it can be handed on as it was (e.g. to a Lightning Trainer).
    `waittime` is the pause after each pre-module launch in lazy mode, as in the bridge."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"detect_recompilation_auto_model expects a torch.nn.Module, got {type(model).__name__}")
    rec = _Recorder(waittime if is_lazy() else 0.0, csv_out)
    handles = []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(
            lambda m, a, k, _n=name: rec.pre(_n, m, a, k), with_kwargs=True))
        handles.append(module.register_forward_hook(lambda m, a, o, _n=name: rec.post(_n, m)))

    def analyse_dynamicity() -> None:
        detail, summary = rec.write()
        total = sum(rec.recompiles.values())
        print(f"Recompilations: {total} in {rec.step} steps; details in {detail}, per module in {summary}")
        for name, n in sorted(rec.recompiles.items(), key=lambda kv: -kv[1]):
            print(f"  {name or '(root)'} ({rec.classes[name]}): {n} of {rec.calls[name]} calls")

    def remove_recompilation_hooks() -> None:
        for h in handles:
            h.remove()

    model.analyse_dynamicity = analyse_dynamicity  # type: ignore[attr-defined]
    model.remove_recompilation_hooks = remove_recompilation_hooks  # type: ignore[attr-defined]
    model._recompilation_recorder = rec  # type: ignore[attr-defined]
    return model
