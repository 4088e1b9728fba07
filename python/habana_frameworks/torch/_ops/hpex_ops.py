"""The `torch.ops.hpu.*` ops behind hpex's fused optimizers and norms, with the bridge's
schemas, and the multi-tensor calls into the Go core they run on.

Each op is one crossing into Go over all tensors of its lists (the Go kernel splits them
over the cores). Scalars the bridge passes as tensors (step size, learning rate, decay)
stay tensors: the Go kernel reads them when it runs, so a lazy graph records them like
any operand and a changing learning rate does not recompile it.
"""
from __future__ import annotations

from typing import Sequence

import torch

from .. import _native

_lib = torch.library.Library("hpu", "FRAGMENT")

# The C ABI takes at most 4096 tensors a call; larger groups are cut into several calls.
_MAX_TENSORS = 4000
_KERNEL_DTYPES = (torch.float32, torch.bfloat16)


def _check_list(op: str, ts: Sequence[torch.Tensor]) -> None:
    for t in ts:
        if t.device.type != "hpu":
            raise RuntimeError(f"{op}: expected all tensors on hpu, got a tensor on {t.device}")
        if t.dtype not in _KERNEL_DTYPES:
            raise RuntimeError(f"{op}: unsupported dtype {t.dtype}; float32 and bfloat16 are supported")


def _scalar_on(t: torch.Tensor | float, like: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A one-element hpu tensor operand (the Go kernels read it when they run)."""
    if isinstance(t, torch.Tensor):
        if t.device.type == "hpu" and t.numel() == 1 and t.dtype in (torch.float32, torch.bfloat16,
                                                                     torch.float64, torch.int32, torch.int64):
            return t.reshape(1) if t.dim() != 1 else t
        return t.detach().reshape(1).to(device=like.device)
    return torch.tensor([t], dtype=dtype).to(like.device)


class _Contig:
    """Contiguous stand-ins for the tensors of a call: read-only ones are copied, written
    ones get a copy that is written back after the call (the Go kernels walk flat memory)."""

    def __init__(self) -> None:
        self.back: list[tuple[torch.Tensor, torch.Tensor]] = []

    def read(self, ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [t if t.is_contiguous() else t.contiguous() for t in ts]

    def write(self, ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        out = []
        for t in ts:
            if t.is_contiguous():
                out.append(t)
            else:
                c = t.contiguous()
                self.back.append((t, c))
                out.append(c)
        return out

    def finish(self) -> None:
        for t, c in self.back:
            t.copy_(c)


def _run_lists(name: str, head: Sequence[torch.Tensor], lists: Sequence[Sequence[torch.Tensor]],
               ints: Sequence[int] = (), floats: Sequence[float] = (),
               per_tensor_ints: Sequence[int] | None = None) -> None:
    """Run op `name` over parallel lists (frame: head, list0, list1, ...; ints (n, *ints)),
    in as few calls as the C ABI's tensor limit allows."""
    n = len(lists[0])
    if n == 0:
        return
    step = max(1, (_MAX_TENSORS - len(head)) // len(lists))
    with torch.no_grad():
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            ts = list(head)
            for lst in lists:
                ts.extend(lst[lo:hi])
            extra = list(per_tensor_ints[lo:hi]) if per_tensor_ints is not None else []
            _native.run(name, ts, [hi - lo, *ints, *extra], floats)


def _no_output(*args, **kwargs):
    return None


def _define(schema: str, impl, fake=_no_output) -> None:
    """Define hpu::<name> with its HPU kernel and a fake kernel (in-place ops return nothing)."""
    name = schema.split("(", 1)[0]
    _lib.define(schema)
    _lib.impl(name, impl, "HPU")
    torch.library.register_fake(f"hpu::{name}")(fake)


def _update_lists(op: str, kernel: str, lists: Sequence[Sequence[torch.Tensor]], written: Sequence[bool],
                  head: Sequence = (), ints: Sequence[int] = (), floats: Sequence[float] = (),
                  per_tensor_ints: Sequence[int] | None = None) -> None:
    """Run a multi-tensor update: the lists (in the Go kernel's order; `written` marks the
    ones it updates in place) are checked, given contiguous stand-ins, and the head
    scalars (numbers or one-element tensors; (value, dtype) pairs) made hpu operands."""
    n = len(lists[0])
    if any(len(lst) != n for lst in lists):
        raise RuntimeError(f"{op}: the tensor lists differ in length ({[len(lst) for lst in lists]})")
    if n == 0:
        return
    for lst in lists:
        _check_list(op, lst)
    c = _Contig()
    flat = [c.write(lst) if w else c.read(lst) for lst, w in zip(lists, written)]
    first = flat[0][0]
    head_t = [_scalar_on(h[0], first, h[1]) if isinstance(h, tuple) else _scalar_on(h, first) for h in head]
    _run_lists(kernel, head_t, flat, ints, floats, per_tensor_ints)
    c.finish()


# ----------------------------------------------------------------------------- AdamW

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)


def optimizer_adamw(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2,
                    epsilon, weight_decay, has_weight_decay, exp_avg_scales=None, exp_avg_sq_scales=None):
    """AdamW over the lists; moments may be float8 (then with one power-of-two scale tensor
    each in exp_avg_scales / exp_avg_sq_scales, rewritten by the kernel)."""
    floats = [float(beta1), float(beta2), float(epsilon)]
    head = [neg_step_t, weight_decay]
    if exp_avg_scales is None and exp_avg_sq_scales is None:
        _update_lists("optimizer_adamw", "optim.adamw", (weight_vec, gradient_vec, exp_avg_vec, exp_avg_sq_vec),
                      (True, False, True, True), head, [int(bool(has_weight_decay))], floats)
        return
    if exp_avg_scales is None or exp_avg_sq_scales is None:
        raise RuntimeError("optimizer_adamw: exp_avg_scales and exp_avg_sq_scales go together")
    n = len(weight_vec)
    lists = (weight_vec, gradient_vec, exp_avg_vec, exp_avg_sq_vec, exp_avg_scales, exp_avg_sq_scales)
    if any(len(lst) != n for lst in lists):
        raise RuntimeError("optimizer_adamw: gradient, weight, moment and scale lists differ in length")
    if n == 0:
        return
    _check_list("optimizer_adamw", weight_vec)
    _check_list("optimizer_adamw", gradient_vec)
    for t in (*exp_avg_vec, *exp_avg_sq_vec):
        if t.device.type != "hpu" or not t.is_contiguous() or t.dtype not in (*_KERNEL_DTYPES, *_FP8):
            raise RuntimeError(f"optimizer_adamw: moments must be contiguous hpu float32, bfloat16 or float8 "
                               f"tensors, got {t.dtype} on {t.device}")
    c = _Contig()
    w, g = c.write(weight_vec), c.read(gradient_vec)
    ts = [_scalar_on(neg_step_t, w[0]), _scalar_on(weight_decay, w[0])]
    for lst in (w, g, exp_avg_vec, exp_avg_sq_vec, exp_avg_scales, exp_avg_sq_scales):
        ts.extend(lst)
    if len(ts) > _MAX_TENSORS:
        raise RuntimeError(f"optimizer_adamw: at most {(_MAX_TENSORS - 2) // 6} tensors a call with float8 moments")
    with torch.no_grad():
        _native.run("optim.adamw", ts, [n, int(bool(has_weight_decay)), 1], floats)
    c.finish()


_define("optimizer_adamw(Tensor[] gradient_vec, Tensor(a!)[] weight_vec, Tensor(b!)[] exp_avg_vec, "
        "Tensor(c!)[] exp_avg_sq_vec, Tensor neg_step_t, float beta1, float beta2, float epsilon, "
        "Tensor weight_decay, bool has_weight_decay, Tensor(d!)[]? exp_avg_scales=None, "
        "Tensor(e!)[]? exp_avg_sq_scales=None) -> ()", optimizer_adamw)


def optimizer_adamw_float_wd(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2,
                             epsilon, weight_decay, exp_avg_scales=None, exp_avg_sq_scales=None):
    """The lazy bridge's form: the decay factor (1 - lr*wd) as a float, always applied.
    DeepSpeed's HPU FusedAdam calls it so in lazy mode; torch.ops.hpu.optimizer_adamw picks
    this overload by the argument types (additive: the tensor form stays as it was)."""
    wd = torch.tensor([float(weight_decay)], dtype=neg_step_t.dtype, device=neg_step_t.device)
    optimizer_adamw(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2, epsilon,
                    wd, True, exp_avg_scales, exp_avg_sq_scales)


_define("optimizer_adamw.float_wd(Tensor[] gradient_vec, Tensor(a!)[] weight_vec, Tensor(b!)[] exp_avg_vec, "
        "Tensor(c!)[] exp_avg_sq_vec, Tensor neg_step_t, float beta1, float beta2, float epsilon, "
        "float weight_decay, Tensor(d!)[]? exp_avg_scales=None, "
        "Tensor(e!)[]? exp_avg_sq_scales=None) -> ()", optimizer_adamw_float_wd)


# ------------------------------------------------------------------------------- SGD

def optimizer_sgd(gradients, weights_in, learning_rate, wd, mom, damp, nesterov):
    _update_lists("optimizer_sgd", "optim.sgd", (weights_in, gradients), (True, False), [learning_rate], [0],
                  [float(wd), float(damp), float(bool(nesterov))])


def optimizer_sgd_momentum(gradients, weights_in, momentum_in, epoch_num, learning_rate, mom, wd, damp,
                           nesterov):
    _update_lists("optimizer_sgd_momentum", "optim.sgd", (weights_in, gradients, momentum_in), (True, False, True),
                  [learning_rate, mom, (epoch_num, torch.int32)], [1], [float(wd), float(damp), float(bool(nesterov))])


_define("optimizer_sgd(Tensor[] gradients, Tensor(a!)[] weights_in, Tensor(b!) learning_rate, "
        "float wd, float mom, float damp, bool nesterov) -> ()", optimizer_sgd)
_define("optimizer_sgd_momentum(Tensor[] gradients, Tensor(a!)[] weights_in, Tensor(b!)[] momentum_in, "
        "Tensor epoch_num, Tensor(c!) learning_rate, Tensor(d!) mom, float wd, float damp, "
        "bool nesterov) -> ()", optimizer_sgd_momentum)


# ------------------------------------------------------------------------------ LAMB

def optimizer_lamb_fused_norm(grad, max_norm):
    """LAMB's gradient clip divisor: global L2 norm / max_norm when above max_norm, else 1."""
    _check_list("optimizer_lamb_fused_norm", grad)
    out = torch.empty(1, dtype=grad[0].dtype, device=grad[0].device)
    with torch.no_grad():
        # The divisor is computed in float32 and rounded once into the grads' dtype.
        out32 = torch.empty(1, dtype=torch.float32, device=grad[0].device) if out.dtype != torch.float32 else out
        _native.run("optim.lamb_norm", [out32, *_Contig().read(grad)], (), [float(max_norm)])
        if out32 is not out:
            out.copy_(out32)
    return out


_define("optimizer_lamb_fused_norm(Tensor[] grad, float max_norm) -> Tensor", optimizer_lamb_fused_norm,
        lambda grad, max_norm: grad[0].new_empty(1))


def optimizer_lamb_phase1(gradients, weights, exp_avg, exp_avg_sq, out_weight_norms, out_adam_norms, out_adam_steps,
                          clip_global_grad_norm, grad_averaging, beta1, beta2, epsilon, bias_correction1,
                          bias_correction2, weight_decay):
    """Moments, the Adam update u (into out_adam_steps) and the norms of w and u (one-element
    tensors) of every tensor."""
    _update_lists("optimizer_lamb_phase1", "optim.lamb_phase1",
                  (weights, gradients, exp_avg, exp_avg_sq, out_weight_norms, out_adam_norms, out_adam_steps),
                  (False, False, True, True, True, True, True),
                  [clip_global_grad_norm, bias_correction1, bias_correction2], [int(grad_averaging)],
                  [float(beta1), float(beta2), float(epsilon), float(weight_decay)])


def optimizer_lamb_phase2(weights, adam_norms, weight_norms, adam_steps, neg_step, wd, use_lamb):
    """w += neg_step * trust_ratio * u, the ratio ||w||/||u|| when wd != 0 or use_lamb."""
    _update_lists("optimizer_lamb_phase2", "optim.lamb_phase2", (weights, adam_norms, weight_norms, adam_steps),
                  (True, False, False, False), [neg_step], [int(bool(use_lamb))], [float(wd)])


_define("optimizer_lamb_phase1(Tensor[] gradients, Tensor[] weights, Tensor(a!)[] exp_avg, Tensor(b!)[] exp_avg_sq, "
        "Tensor(c!)[] out_weight_norms, Tensor(d!)[] out_adam_norms, Tensor(e!)[] out_adam_steps, "
        "Tensor clip_global_grad_norm, int grad_averaging, float beta1, float beta2, float epsilon, "
        "Tensor bias_correction1, Tensor bias_correction2, float weight_decay) -> ()", optimizer_lamb_phase1)
_define("optimizer_lamb_phase2(Tensor(a!)[] weights, Tensor[] adam_norms, Tensor[] weight_norms, "
        "Tensor[] adam_steps, Tensor neg_step, float wd, bool use_lamb) -> ()", optimizer_lamb_phase2)


def lamb_step(clip: torch.Tensor, weights, grads, exp_avgs, exp_avg_sqs, *, lr: float, beta1: float,
              beta2: float, beta3: float, eps: float, weight_decay: float, bias_correction1: float,
              bias_correction2: float, use_lamb: bool) -> None:
    """Both LAMB phases for one group in one Go call (hpusim's fusion of the bridge's
    optimizer_lamb_phase1 and optimizer_lamb_phase2; u is recomputed, never stored)."""
    _update_lists("optimizer_lamb", "optim.lamb", (weights, grads, exp_avgs, exp_avg_sqs), (True, False, True, True),
                  [clip], [int(bool(use_lamb))],
                  [lr, beta1, beta2, beta3, eps, weight_decay, bias_correction1, bias_correction2])


# ------------------------------------------------------------------------------ LARS

def optimizer_lars(params, grads, skip_masks, eeta, weight_decay, eps, lr):
    if len(skip_masks) != len(params):
        raise RuntimeError("optimizer_lars: params, grads and skip_masks differ in length")
    _update_lists("optimizer_lars", "optim.lars", (params, grads), (False, True), [lr], (),
                  [float(eeta), float(weight_decay), float(eps)], per_tensor_ints=[int(s) for s in skip_masks])


_define("optimizer_lars(Tensor[] params, Tensor(a!)[] grads, int[] skip_masks, float eeta, "
        "float weight_decay, float eps, Tensor lr) -> ()", optimizer_lars)


# -------------------------------------------------------------- ResourceApplyMomentum

def optimizer_resource_apply_momentum(params_momentum_buf_list, dp_list, momentum):
    pm = list(params_momentum_buf_list)
    if len(pm) != 2 * len(dp_list):
        raise RuntimeError("optimizer_resource_apply_momentum: expected [param, momentum_buf] pairs, "
                           "one per gradient")
    _update_lists("optimizer_resource_apply_momentum", "optim.resource_apply_momentum",
                  (pm[0::2], pm[1::2], dp_list), (True, True, False), floats=[float(momentum)])


_define("optimizer_resource_apply_momentum(Tensor(a!)[] params_momentum_buf_list, Tensor[] dp_list, "
        "float momentum) -> ()", optimizer_resource_apply_momentum)


# ------------------------------------------------------------------------------- EMA

def optimizer_ema(model_inputs, updated_ema, decay):
    _update_lists("optimizer_ema", "optim.ema", (updated_ema, model_inputs), (True, False), [decay])


_define("optimizer_ema(Tensor[] model_inputs, Tensor(a!)[] updated_ema, Tensor decay) -> ()", optimizer_ema)


# -------------------------------------------------------------------------- clip norm

def fused_clip_norm(grad, max_norm, norm_type):
    if float(norm_type) != 2.0:
        raise RuntimeError("unsupported norm_type for FusedClipNorm")
    _check_list("fused_clip_norm", grad)
    if len(grad) + 2 > _MAX_TENSORS:
        raise RuntimeError(f"fused_clip_norm: at most {_MAX_TENSORS - 2} gradients a call, got {len(grad)}")
    c = _Contig()
    g = c.write(grad)
    out = torch.empty((), dtype=grad[0].dtype, device=grad[0].device)
    with torch.no_grad():
        _native.run("optim.clip_norm", [out, _scalar_on(max_norm, g[0]), *g])
    c.finish()
    return out


_define("fused_clip_norm(Tensor(a!)[] grad, Tensor max_norm, float norm_type) -> Tensor", fused_clip_norm,
        lambda grad, max_norm, norm_type: grad[0].new_empty(()))


# --------------------------------------------------------------------------- Adagrad

def adagrad_step(weights, grads, sums, *, clr: float, weight_decay: float, eps: float) -> None:
    """One fused Adagrad update of a group (the bridge's `_hpex_C.fused_adagrad`)."""
    _update_lists("fused_adagrad", "optim.adagrad", (weights, grads, sums), (True, False, True),
                  floats=[clr, weight_decay, eps])


# ---------------------------------------------------------------------------- RMS norm

_lib.define("rms_norm(Tensor data_in, Tensor gamma, float epsilon) -> (Tensor, Tensor)")
_lib.define("rms_norm_fast(Tensor data_in, Tensor gamma, float epsilon) -> (Tensor, Tensor)")
_lib.define("rms_norm_backward(Tensor grad_in, Tensor data_in, Tensor gamma, Tensor inverse_rms, "
            "bool use_stages, int bwd_mode) -> (Tensor, Tensor)")


def _rms_check(x: torch.Tensor, gamma: torch.Tensor) -> None:
    if gamma.dim() != 1 or x.dim() == 0 or x.shape[-1] != gamma.shape[0]:
        raise RuntimeError(f"rms_norm: gamma of shape {tuple(gamma.shape)} does not match the last dim of "
                           f"data_in {tuple(x.shape)}")
    _check_list("rms_norm", [x, gamma])


def rms_norm(data_in, gamma, epsilon):
    """y = x * rsqrt(mean(x^2, -1) + eps) * gamma, and the inverse RMS ([..., 1], float32)."""
    _rms_check(data_in, gamma)
    x = data_in.contiguous()
    y = torch.empty_like(x)
    inv = torch.empty(x.shape[:-1] + (1,), dtype=torch.float32, device=x.device)
    if x.numel():
        _native.run("rms_norm", [y, inv, x, gamma.contiguous()], (), [float(epsilon)])
    return y, inv


def rms_norm_backward(grad_in, data_in, gamma, inverse_rms, use_stages, bwd_mode):
    """Gradients of rms_norm for data_in and gamma (use_stages and bwd_mode choose how the
    device partitions the work; the result is the same)."""
    _rms_check(data_in, gamma)
    x, dy = data_in.contiguous(), grad_in.to(data_in.dtype).contiguous()
    inv = inverse_rms.to(torch.float32).contiguous()
    dx = torch.empty_like(x)
    dg = torch.empty(gamma.shape, dtype=torch.float32, device=x.device)
    if x.numel():
        _native.run("rms_norm_bwd", [dx, dg, dy, x, gamma.contiguous(), inv])
    else:
        dg.zero_()
    return dx, dg.to(gamma.dtype)


for _name, _fn in (("rms_norm", rms_norm), ("rms_norm_fast", rms_norm), ("rms_norm_backward", rms_norm_backward)):
    _lib.impl(_name, _fn, "HPU")


def _rms_norm_fake(data_in, gamma, epsilon):
    return torch.empty_like(data_in), data_in.new_empty(data_in.shape[:-1] + (1,), dtype=torch.float32)


torch.library.register_fake("hpu::rms_norm")(_rms_norm_fake)
torch.library.register_fake("hpu::rms_norm_fast")(_rms_norm_fake)


@torch.library.register_fake("hpu::rms_norm_backward")
def _rms_norm_backward_fake(grad_in, data_in, gamma, inverse_rms, use_stages, bwd_mode):
    return torch.empty_like(data_in), torch.empty_like(gamma)


# ------------------------------------------------------------ rotary position embedding

_lib.define("rotary_pos_embedding(Tensor input, Tensor sin, Tensor cos, Tensor? position_ids, int offset, "
            "int mode) -> Tensor")
_lib.define("rotary_pos_embedding_backward(Tensor grad_in, Tensor sin, Tensor cos, Tensor? position_ids, "
            "int offset, int mode) -> Tensor")


def _rope_table(t: torch.Tensor, like: torch.Tensor, position_ids, offset: int) -> torch.Tensor:
    """cos or sin as a view of like's shape: rows gathered by position_ids ([B, S] tokens
    from a [..., S_max, D] cache), or sliced from offset along the sequence."""
    S, D = like.shape[-2], like.shape[-1]
    if position_ids is not None:
        t = t.reshape(-1, t.shape[-1])[position_ids.to(t.device)]  # [B, S, D]
        if like.dim() == 4:
            t = t.unsqueeze(1)
    elif offset:
        t = t.narrow(-2, offset, S)
    elif t.dim() >= 2 and t.shape[-2] > S:
        t = t.narrow(-2, 0, S)
    if t.shape[-1] != D:
        raise RuntimeError(f"rotary_pos_embedding: cos/sin last dim {t.shape[-1]} does not match the input's {D}")
    return t.to(like.dtype).expand(like.shape)


def _as4(t: torch.Tensor) -> torch.Tensor:
    while t.dim() < 4:
        t = t.unsqueeze(0)
    if t.dim() > 4:
        t = t.reshape(-1, *t.shape[-3:])
    return t


def _rope(x, sin, cos, position_ids, offset, mode, backward):
    _check_list("rotary_pos_embedding", [x])
    c = _rope_table(cos, x, position_ids, offset)
    s = _rope_table(sin, x, position_ids, offset)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel():
        _native.run("rope", [_as4(out), _as4(x), _as4(c), _as4(s)], (int(mode), int(backward)))
    return out


def rotary_pos_embedding(input, sin, cos, position_ids, offset, mode):
    return _rope(input, sin, cos, position_ids, offset, mode, False)


def rotary_pos_embedding_backward(grad_in, sin, cos, position_ids, offset, mode):
    return _rope(grad_in, sin, cos, position_ids, offset, mode, True)


_lib.impl("rotary_pos_embedding", rotary_pos_embedding, "HPU")
_lib.impl("rotary_pos_embedding_backward", rotary_pos_embedding_backward, "HPU")


@torch.library.register_fake("hpu::rotary_pos_embedding")
def _rope_fake(input, sin, cos, position_ids, offset, mode):
    return torch.empty_like(input)


@torch.library.register_fake("hpu::rotary_pos_embedding_backward")
def _rope_bwd_fake(grad_in, sin, cos, position_ids, offset, mode):
    return torch.empty_like(grad_in)
