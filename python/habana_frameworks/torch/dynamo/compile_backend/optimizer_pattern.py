"""A compiled torch.optim.Adam/AdamW step as one multi-tensor Go op.

Dynamo traces torch's single-tensor Adam (what it runs for hpu parameters) into ~20 aten
ops per parameter: the moment updates, the bias corrections of the host step count, the
update and the write-backs (`copy_`) of the parameter, the moments and the step. This pass
finds those per-parameter groups in an aten graph, checks every node and constant of each,
and replaces the groups that share hyper-parameters with ONE `hpu::adam_torch_` call (in
place: the group's write-backs go with it), run by
a Go kernel over all of the group's tensors on both cores (bridge/recipe_optim.go,
kernels/optim_adam_torch*.go). The kernel computes what eager torch.optim.Adam/AdamW
computes on CPU without `capturable` (the step count a host tensor), bit for bit: the
traced graph itself is the `capturable` formula, which rounds differently.

What is matched: Adam and AdamW, weight_decay zero or not, maximize, amsgrad; float32 or
bfloat16 parameters with their state, on hpu; host float32 step counts. Not bfloat16 Adam
with (L2) weight_decay, whose CPU result depends on torch's thread chunking.
Anything else (device step counts, tensor hyper-parameters, other optimizers, a value of
the group read elsewhere in the graph) keeps the traced ops. PT_HPU_COMPILE_FUSE_OPTIMIZER=0
(`fuse_optimizer`) turns the pass off.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ... import _native
from .logger import logger

aten = torch.ops.aten

_lib = torch.library.Library("hpu", "FRAGMENT")

# Flag bits of hpu::adam_torch (bridge/recipe_optim.go).
DECAY, L2, MAXIMIZE, AMSGRAD = 1, 2, 4, 8
_DTYPES = (torch.float32, torch.bfloat16)
# Tensors per Go call: the C ABI takes at most 4096 operands; a call has up to 10 per parameter.
_PARAMS_PER_CALL = 360

_counts = {"calls": 0, "parameters": 0}


def counts() -> dict[str, int]:
    """calls: hpu::adam_torch_ nodes put into compiled graphs; parameters: the parameter
    steps they replaced."""
    return dict(_counts)


def adam_torch_(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor], exp_avgs: Sequence[torch.Tensor],
                exp_avg_sqs: Sequence[torch.Tensor], max_exp_avg_sqs: Sequence[torch.Tensor],
                steps: Sequence[torch.Tensor], lr: float, beta1: float, beta2: float, eps: float,
                lerp_weight: float, sq_weight: float, decay: float, weight_decay: float, flags: int) -> None:
    """One Adam step of every parameter, in place (parameters, moments and with amsgrad
    the maxima); `steps` are the incremented 0-dim step counts, read, not written."""
    n = len(params)
    ams = bool(flags & AMSGRAD)
    lists = [params, grads, exp_avgs, exp_avg_sqs, steps] + ([max_exp_avg_sqs] if ams else [])
    if any(len(lst) != n for lst in lists) or (not ams and len(max_exp_avg_sqs)):
        raise RuntimeError(f"adam_torch_: the tensor lists differ in length ({[len(lst) for lst in lists]})")
    state = [params, grads, exp_avgs, exp_avg_sqs] + ([max_exp_avg_sqs] if ams else [])
    for lst in state:
        for t, p in zip(lst, params):
            if t.device.type != "hpu" or t.dtype not in _DTYPES or t.dtype != p.dtype or t.shape != p.shape:
                raise RuntimeError(f"adam_torch_: expected hpu float32/bfloat16 tensors of their parameter's "
                                   f"dtype and shape, got {t.dtype} {tuple(t.shape)} on {t.device}")
    if n == 0:
        return
    # Written lists need contiguous memory: a non-contiguous one is updated in a copy that
    # is copied back.
    back = []

    def writable(t: torch.Tensor) -> torch.Tensor:
        if t.is_contiguous():
            return t
        c = t.contiguous()
        back.append((t, c))
        return c

    written = [[writable(t) for t in lst] for lst in (params, exp_avgs, exp_avg_sqs)
               + ((max_exp_avg_sqs,) if ams else ())]
    grads = [g.contiguous() for g in grads]
    device = params[0].device
    steps = [s if s.device.type == "hpu" else s.to(device) for s in steps]
    ins = [written[0], grads, written[1], written[2]] + ([written[3]] if ams else [])
    floats = [float(lr), float(beta1), float(beta2), float(eps), float(lerp_weight), float(sq_weight),
              float(decay), float(weight_decay)]
    with torch.no_grad():
        for lo in range(0, n, _PARAMS_PER_CALL):
            hi = min(n, lo + _PARAMS_PER_CALL)
            ts = [t for lst in written for t in lst[lo:hi]] + list(steps[lo:hi])
            ts += [t for lst in ins for t in lst[lo:hi]]
            _native.run("optim.adam_torch", ts, [hi - lo, int(flags)], floats)
        for t, c in back:
            t.copy_(c)


def _adam_torch_fake(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps,
                     lerp_weight, sq_weight, decay, weight_decay, flags):
    return None


_lib.define("adam_torch_(Tensor(a!)[] params, Tensor[] grads, Tensor(b!)[] exp_avgs, Tensor(c!)[] exp_avg_sqs, "
            "Tensor(d!)[] max_exp_avg_sqs, Tensor[] steps, float lr, float beta1, float beta2, float eps, "
            "float lerp_weight, float sq_weight, float decay, float weight_decay, int flags) -> ()")
_lib.impl("adam_torch_", adam_torch_, "HPU")
torch.library.register_fake("hpu::adam_torch_")(_adam_torch_fake)
# Placement puts it into recipes although it has no output (shared_layer._IN_PLACE_NATIVE).


class _NoMatch(Exception):
    pass


def _call(node: Any, target: Any, nargs: int | None = None, kwargs: tuple[str, ...] = ()) -> tuple:
    """node's args when it is call_function(target) with nargs args and only `kwargs`."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or node.target is not target:
        raise _NoMatch
    if nargs is not None and len(node.args) != nargs:
        raise _NoMatch
    if set(node.kwargs) - set(kwargs):
        raise _NoMatch
    return node.args


def _number(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise _NoMatch
    return float(x)


def _placeholder(x: Any) -> torch.fx.Node:
    if not isinstance(x, torch.fx.Node) or x.op != "placeholder":
        raise _NoMatch
    return x


@dataclass
class _Match:
    """One parameter's Adam step in the graph."""
    param: torch.fx.Node
    grad: torch.fx.Node
    avg: torch.fx.Node
    sq: torch.fx.Node
    max_sq: torch.fx.Node | None
    step: torch.fx.Node  # the incremented count (step + 1)
    new_param: torch.fx.Node
    new_avg: torch.fx.Node
    new_sq: torch.fx.Node
    new_max: torch.fx.Node | None
    nodes: set[torch.fx.Node]  # every node of the group except `step`
    key: tuple  # (lr, beta1, beta2, eps, lerp_weight, sq_weight, decay, weight_decay, flags, dtype)


def _match_adam(out: torch.fx.Node) -> _Match:
    """The group ending in `out` = addcdiv(param', exp_avg', denom), as dynamo traces
    torch.optim.adam._single_tensor_adam."""
    nodes = {out}

    def take(node: Any, target: Any, nargs: int | None = None, kwargs: tuple[str, ...] = ()) -> tuple:
        args = _call(node, target, nargs, kwargs)
        nodes.add(node)
        return args

    p1, m1, den = take(out, aten.addcdiv.default, 3)
    flags, decay, l2 = 0, 1.0, 0.0
    if isinstance(p1, torch.fx.Node) and p1.op == "call_function":
        param, decay = take(p1, aten.mul.Tensor, 2)
        decay = _number(decay)
        flags |= DECAY
    param = _placeholder(param if flags & DECAY else p1)
    m, g1, w1 = take(m1, aten.lerp.Scalar, 3)
    m, w1 = _placeholder(m), _number(w1)
    grad = g1
    if isinstance(grad, torch.fx.Node) and grad.target is aten.add.Tensor:
        grad, p_again = take(grad, aten.add.Tensor, 2, ("alpha",))
        if p_again is not param or "alpha" not in g1.kwargs:
            raise _NoMatch
        l2 = _number(g1.kwargs["alpha"])
        flags |= L2
    if isinstance(grad, torch.fx.Node) and grad.target is aten.neg.default:
        (grad,) = take(grad, aten.neg.default, 1)
        flags |= MAXIMIZE
    grad = _placeholder(grad)
    # denom = sqrt(u) / (sqrt(1 - b2^s) * -(lr / (1 - b1^s))) + eps / -(lr / (1 - b1^s))
    dv, me = take(den, aten.add.Tensor, 2)
    rc2, eps = take(me, aten.mul.Tensor, 2)
    eps = _number(eps)
    (ng,) = take(rc2, aten.reciprocal.default, 1)
    sqv, mm = take(dv, aten.div.Tensor, 2)
    sq2, ng_again = take(mm, aten.mul.Tensor, 2)
    if ng_again is not ng:
        raise _NoMatch
    (ml,) = take(ng, aten.neg.default, 1)
    rc, lr = take(ml, aten.mul.Tensor, 2)
    lr = _number(lr)
    (rs1,) = take(rc, aten.reciprocal.default, 1)
    pw1, one = take(rs1, aten.rsub.Scalar, 2)
    b1, step = take(pw1, aten.pow.Scalar, 2)
    (rs2,) = take(sq2, aten.sqrt.default, 1)
    pw2, one2 = take(rs2, aten.rsub.Scalar, 2)
    b2, step2 = take(pw2, aten.pow.Scalar, 2)
    if one != 1 or one2 != 1 or step2 is not step:
        raise _NoMatch
    b1, b2 = _number(b1), _number(b2)
    step_in, inc = _call(step, aten.add.Tensor, 2)
    if inc != 1:
        raise _NoMatch
    _placeholder(step_in)
    (u,) = take(sqv, aten.sqrt.default, 1)
    max_sq = new_max = None
    if isinstance(u, torch.fx.Node) and u.target is aten.copy.default:
        max_sq, mx = take(u, aten.copy.default, 2)
        mx_again, v1 = take(mx, aten.maximum.default, 2)
        if mx_again is not max_sq:
            raise _NoMatch
        max_sq, new_max = _placeholder(max_sq), u
        flags |= AMSGRAD
    else:
        v1 = u
    vb, gg2 = take(v1, aten.add.Tensor, 2)
    v, b2_again = take(vb, aten.mul.Tensor, 2)
    gg, c2 = take(gg2, aten.mul.Tensor, 2)
    ga, gb = take(gg, aten.mul.Tensor, 2)
    if ga is not g1 or gb is not g1 or _number(b2_again) != b2:
        raise _NoMatch
    v, c2 = _placeholder(v), _number(c2)
    dtype = _check_values(param, grad, m, v, max_sq, step_in)
    if dtype == torch.bfloat16 and flags & L2:
        # torch's bfloat16 `grad.add(param, alpha=wd)` rounds the product to bfloat16 in the
        # scalar tails of its vector loops only, which depend on its thread chunking.
        raise _NoMatch
    return _Match(param, grad, m, v, max_sq, step, out, m1, v1, new_max, nodes,
                  (lr, b1, b2, eps, w1, c2, decay, l2, flags, dtype))


def _check_values(param: torch.fx.Node, grad: torch.fx.Node, m: torch.fx.Node, v: torch.fx.Node,
                  max_sq: torch.fx.Node | None, step: torch.fx.Node) -> torch.dtype:
    pv = param.meta.get("val")
    if not isinstance(pv, torch.Tensor) or pv.device.type != "hpu" or pv.dtype not in _DTYPES:
        raise _NoMatch
    for n in (grad, m, v) + ((max_sq,) if max_sq is not None else ()):
        t = n.meta.get("val")
        if not isinstance(t, torch.Tensor) or t.device != pv.device or t.dtype != pv.dtype or t.shape != pv.shape:
            raise _NoMatch
        if any(isinstance(s, torch.SymInt) for s in t.shape):
            raise _NoMatch
    s = step.meta.get("val")
    # Host float32 step counts: Adam without `capturable`, the formula the kernel computes.
    if not isinstance(s, torch.Tensor) or s.device.type != "cpu" or s.dim() != 0 or s.dtype != torch.float32:
        raise _NoMatch
    return pv.dtype


def _write_backs(gm: torch.fx.GraphModule) -> dict[tuple[torch.fx.Node, torch.fx.Node], torch.fx.Node]:
    """(input, value) -> its `input.copy_(value)` node."""
    out = {}
    for node in gm.graph.find_nodes(op="call_function", target=aten.copy_.default):
        if len(node.args) == 2 and not node.kwargs:
            out[(node.args[0], node.args[1])] = node
    return out


def fuse_adam_steps(gm: torch.fx.GraphModule) -> int:
    """Replace every matched Adam group by hpu::adam_torch_ calls (one per set of equal
    hyper-parameters); returns how many parameters' steps were fused."""
    copies = _write_backs(gm)
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    groups: dict[tuple, list[tuple[_Match, list[torch.fx.Node]]]] = {}
    claimed: set[torch.fx.Node] = set()
    for node in gm.graph.find_nodes(op="call_function", target=aten.addcdiv.default):
        try:
            m = _match_adam(node)
            writes = [copies.get((m.param, m.new_param)), copies.get((m.avg, m.new_avg)),
                      copies.get((m.sq, m.new_sq))]
            if m.max_sq is not None:
                writes.append(copies.get((m.max_sq, m.new_max)))
            if any(w is None for w in writes):
                raise _NoMatch
            # Every value of the group is used only inside it and by its write-backs; its
            # inputs are not written before the last of its nodes runs.
            inside = m.nodes | set(writes)
            if any(u not in inside for n in m.nodes for u in n.users):
                raise _NoMatch
            last = max(order[n] for n in m.nodes)
            if any(order[w] < last for w in writes) or m.nodes & claimed:
                raise _NoMatch
            for ph in (m.param, m.grad, m.avg, m.sq) + ((m.max_sq,) if m.max_sq is not None else ()):
                if any(u not in inside for u in ph.users):
                    raise _NoMatch
        except _NoMatch:
            continue
        claimed |= m.nodes
        groups.setdefault(m.key, []).append((m, writes))
    fused = 0
    for key, members in groups.items():
        lr, b1, b2, eps, w1, c2, decay, l2, flags, _dtype = key
        ams = bool(flags & AMSGRAD)
        last = max((n for m, _ in members for n in m.nodes), key=order.__getitem__)
        args = ([m.param for m, _ in members], [m.grad for m, _ in members], [m.avg for m, _ in members],
                [m.sq for m, _ in members], [m.max_sq for m, _ in members] if ams else [],
                [m.step for m, _ in members], lr, b1, b2, eps, w1, c2, decay, l2, flags)
        with gm.graph.inserting_after(last):
            call = gm.graph.call_function(torch.ops.hpu.adam_torch_.default, args)
        call.meta["val"] = None
        n = len(members)
        # The op writes the parameters and the state in place: their write-backs go.
        for _, writes in members:
            for w in writes:
                gm.graph.erase_node(w)
        for m, _ in members:
            for node in sorted(m.nodes, key=order.__getitem__, reverse=True):
                if not node.users:
                    gm.graph.erase_node(node)
        fused += n
        _counts["calls"] += 1
        _counts["parameters"] += n
        logger.debug("Adam step of %d parameters fused into one hpu::adam_torch_ call (lr=%s, betas=(%s, %s), "
                     "flags=%d)", n, lr, b1, b2, flags)
    if fused:
        gm.graph.lint()
        gm.recompile()
    return fused
