"""GRAPH_VISUALIZATION dumps of the FX graphs hpu_backend compiles, before and after its
passes (GraphViz dot, next to lazy mode's recipe dumps under PT_HPU_GRAPH_DUMP_PREFIX).
Nodes are coloured by placement: recipe clusters blue, eager nodes red."""
from __future__ import annotations

import os

import torch

from .._env_flags import truthy

_COLOURS = {"hpu_cluster": "lightblue", "eager": "salmon"}


def enabled() -> bool:
    return truthy(os.getenv("GRAPH_VISUALIZATION"))


def _label(node: torch.fx.Node) -> str:
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    val = node.meta.get("val")
    shape = f"\\n{list(val.shape)} {str(val.dtype).replace('torch.', '')}" if isinstance(val, torch.Tensor) else ""
    return f"{node.name}\\n{node.op}: {target}{shape}".replace('"', "'")


def to_dot(gm: torch.fx.GraphModule, title: str) -> str:
    lines = [f'digraph "{title}" {{', f'  label="{title}";', "  node [shape=box, style=filled];"]
    for node in gm.graph.nodes:
        colour = _COLOURS.get(node.meta.get("placement", ""), "white")
        if node.op == "call_function" and getattr(node.target, "is_hpu_cluster", False):
            colour = "lightblue"
        lines.append(f'  "{node.name}" [label="{_label(node)}", fillcolor={colour}];')
        for src in node.all_input_nodes:
            lines.append(f'  "{src.name}" -> "{node.name}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


def dump(gm: torch.fx.GraphModule, graph_name: str, stage: str) -> str | None:
    """Write `<prefix>/<graph_name>-<stage>.dot`; returns the path (None when disabled)."""
    if not enabled():
        return None
    prefix = os.getenv("PT_HPU_GRAPH_DUMP_PREFIX") or ".graph_dumps"
    os.makedirs(prefix, exist_ok=True)
    path = os.path.join(prefix, f"{graph_name}-{stage}.dot")
    with open(path, "w", encoding="utf-8") as f:
        f.write(to_dot(gm, f"{graph_name} {stage}"))
    return path
