"""Program order of a cluster for the recipe's elementwise fusion.

A recipe fuses runs of CONSECUTIVE elementwise ops over the same loop shape into one
pass over memory (bridge/compile.go). AOT autograd emits graphs breadth-first: an
optimizer step over N parameters is "N decays, N lerps, N squares, ..., N sqrts, ...",
so no two neighbours share a shape and a 6-parameter AdamW recipe ran 60 steps. Here the
cluster's nodes are put in an order that keeps same-shape pointwise chains together (a
list schedule that prefers a ready pointwise node of the shape being run), so each
parameter's update, or a backward's elementwise tail, becomes one fused loop.

Only the order changes, never an op: every result is bitwise what it was. The order
keeps every data dependency, every write into a graph input after each read of the
value it replaces, and the relative order of ops with effects (random draws take their
seeds in program order, so dropout masks stay those of eager mode). A cluster holding an
op with an unknown effect (in-place or out= ops other than input writes) is left as it
is."""
from __future__ import annotations

import heapq
import operator
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense
from torch.multiprocessing.reductions import StorageWeakRef

from .logger import logger

aten = torch.ops.aten


def _is_input_write(node: torch.fx.Node) -> bool:
    return (node.target is aten.copy_.default and isinstance(node.args[0], torch.fx.Node)
            and node.args[0].op == "placeholder")


def _mutates(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return False
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


def _has_effect(node: torch.fx.Node) -> bool:
    """Random ops and anything torch cannot say is pure: kept in their program order."""
    tags = getattr(node.target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return True
    return not isinstance(node.target, torch._ops.OpOverload) and node.target is not operator.getitem


def _loop_shape(node: torch.fx.Node) -> tuple | None:
    """The shape a pointwise node loops over (its output's), or None for other nodes."""
    tags = getattr(node.target, "tags", ())
    if torch.Tag.pointwise not in tags and not _is_input_write(node):
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() == 0:
        return None
    return tuple(s if isinstance(s, int) else str(s) for s in val.shape)  # SymInts are unhashable


def _readers(node: torch.fx.Node) -> list[torch.fx.Node]:
    """Nodes that read node's memory: its users and, through views, theirs."""
    seen: dict[torch.fx.Node, None] = {}
    todo = list(node.users)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen[n] = None
        if n.target is operator.getitem or (isinstance(n.target, torch._ops.OpOverload)
                                            and n.target.is_view):
            todo.extend(n.users)
    return list(seen)


def _storage_key(node: torch.fx.Node) -> Any:
    val = node.meta.get("val")
    try:
        return StorageWeakRef(val.untyped_storage())
    except Exception:  # no fake value or no storage: may alias anything
        return None


def _never_tensor(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return val is not None and not isinstance(val, torch.Tensor)


def _placeholder_aliases(graph: torch.fx.Graph) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """Per placeholder, the placeholders that may share its memory (itself included): a
    view of an input made outside the cluster can come in next to the input."""
    phs = [n for n in graph.nodes if n.op == "placeholder" and not _never_tensor(n)]
    keys = {p: _storage_key(p) for p in phs}
    return {p: [q for q in phs if q is p or keys[p] is None or keys[q] is None or keys[p] == keys[q]]
            for p in phs}


def order_for_fusion(gm: torch.fx.GraphModule) -> bool:
    """Reorder gm's call_function nodes (in place) so same-shape pointwise chains are
    consecutive. Returns whether the order changed."""
    graph = gm.graph
    body = [n for n in graph.nodes if n.op == "call_function"]
    if len(body) < 3:
        return False
    for n in body:
        if _mutates(n) and not _is_input_write(n):
            logger.debug("fusion order: %s mutates an input; cluster order kept", n.target)
            return False
    pos = {n: i for i, n in enumerate(body)}
    aliases = _placeholder_aliases(graph)
    deps: dict[torch.fx.Node, set[torch.fx.Node]] = {n: set() for n in body}
    for n in body:
        deps[n].update(a for a in n.all_input_nodes if a in pos)
        if _is_input_write(n):
            for ph in aliases.get(n.args[0], [n.args[0]]):
                deps[n].update(r for r in _readers(ph) if r in pos and r is not n)
    last_effect = None
    last_write: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in body:
        if _has_effect(n):
            if last_effect is not None:
                deps[n].add(last_effect)
            last_effect = n
        if _is_input_write(n):
            if n.args[0] in last_write:  # two writes into one input keep their order
                deps[n].add(last_write[n.args[0]])
            last_write[n.args[0]] = n
    users: dict[torch.fx.Node, list[torch.fx.Node]] = {n: [] for n in body}
    for n, ds in deps.items():
        for d in ds:
            users[d].append(n)
    shape = {n: _loop_shape(n) for n in body}
    waiting = {n: len(ds) for n, ds in deps.items()}
    # Ready nodes by program position, and per loop shape (for the run being built).
    ready: list[tuple[int, torch.fx.Node]] = []
    ready_by_shape: dict[Any, list[tuple[int, torch.fx.Node]]] = {}
    done: set[torch.fx.Node] = set()

    def push(n: torch.fx.Node) -> None:
        heapq.heappush(ready, (pos[n], n))
        if shape[n] is not None:
            heapq.heappush(ready_by_shape.setdefault(shape[n], []), (pos[n], n))

    def pop_shape(s: Any) -> torch.fx.Node | None:
        heap = ready_by_shape.get(s)
        while heap:
            _, n = heapq.heappop(heap)
            if n not in done:
                return n
        return None

    for n in body:
        if not waiting[n]:
            push(n)
    order: list[torch.fx.Node] = []
    current = None
    while len(order) < len(body):
        n = pop_shape(current) if current is not None else None
        if n is None:
            while True:
                _, n = heapq.heappop(ready)
                if n not in done:
                    break
        done.add(n)
        order.append(n)
        current = shape[n] if shape[n] is not None else current
        for u in users[n]:
            waiting[u] -= 1
            if not waiting[u]:
                push(u)
    if order == body:
        return False
    out = next(n for n in graph.nodes if n.op == "output")
    for n in order:
        out.prepend(n)
    graph.lint()
    gm.recompile()
    return True


def _inplace_overload(node: torch.fx.Node) -> Any:
    """aten.f_.<same overload> for a pointwise aten.f.<overload>, or None."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or torch.Tag.pointwise not in target.tags:
        return None
    packet = getattr(aten, target.overloadpacket.__name__ + "_", None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def _same_layout(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return (isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor) and va.shape == vb.shape
            and va.dtype == vb.dtype)


def _write_chain(write: torch.fx.Node) -> list[torch.fx.Node] | None:
    """For `copy_(x, y)`, the pointwise ops from x to y (y = f_r(...f_1(x, ...)...)), each
    the only user of the one before, all of x's shape and dtype; None if there is none."""
    x, y = write.args[0], write.args[1]
    xval = x.meta.get("val")
    if not isinstance(xval, torch.Tensor) or not is_non_overlapping_and_dense(xval):
        return None  # an in-place op must not write one element twice
    chain: list[torch.fx.Node] = []
    cur = y
    while isinstance(cur, torch.fx.Node) and cur.op == "call_function" and len(chain) < 64:
        if _inplace_overload(cur) is None or not _same_layout(cur, x) or cur.kwargs.get("out") is not None:
            return None
        if chain and list(cur.users) != [chain[0]]:
            return None
        chain.insert(0, cur)
        if cur.args and cur.args[0] is x:
            return chain
        cur = cur.args[0] if cur.args else None
    return None


def reinplace_input_writes(gm: torch.fx.GraphModule) -> int:
    """`y = f_r(...f_1(x)...); x.copy_(y)` with x a cluster input becomes the in-place
    chain `f_1_(x) ... f_r_(x)`: the chain's loop then writes x itself (the recipe fuses it
    with the rest of the chain) instead of a buffer copied into x by a separate step. Done
    only where, in the final order, nothing else reads x (or an input that may share its
    memory) from f_1 on and nothing else writes it. Returns the number of writes folded."""
    graph = gm.graph
    nodes = list(graph.nodes)
    pos = {n: i for i, n in enumerate(nodes)}
    aliases = _placeholder_aliases(graph)
    out = nodes[-1]
    writes = [n for n in nodes if n.op == "call_function" and _is_input_write(n)]
    written: dict[torch.fx.Node, int] = {}
    for w in writes:
        for ph in aliases.get(w.args[0], [w.args[0]]):
            written[ph] = written.get(ph, 0) + 1
    folded = 0
    for w in writes:
        x = w.args[0]
        chain = _write_chain(w) if not w.users and written.get(x) == 1 else None
        if chain is None or any(out in c.users for c in chain):
            continue
        group = aliases.get(x)
        if group is None or any(written.get(ph, 0) != 1 or (ph is not x and ph in written) for ph in group):
            continue
        first = pos[chain[0]]
        if any(pos[r] >= first and r is not chain[0] and r is not w for ph in group for r in _readers(ph)):
            continue
        for c in chain:
            c.target = _inplace_overload(c)
        w.replace_all_uses_with(x)
        graph.erase_node(w)
        folded += 1
    if folded:
        graph.lint()
        gm.recompile()
    return folded
