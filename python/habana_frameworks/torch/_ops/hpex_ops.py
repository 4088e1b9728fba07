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


def _scalar_on(t: torch.Tensor | float, like: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
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


# ----------------------------------------------------------------------------- AdamW

_lib.define(
    "optimizer_adamw(Tensor[] gradient_vec, Tensor(a!)[] weight_vec, Tensor(b!)[] exp_avg_vec, "
    "Tensor(c!)[] exp_avg_sq_vec, Tensor neg_step_t, float beta1, float beta2, float epsilon, "
    "Tensor weight_decay, bool has_weight_decay, Tensor(d!)[]? exp_avg_scales=None, "
    "Tensor(e!)[]? exp_avg_sq_scales=None) -> ()")


def optimizer_adamw(gradient_vec, weight_vec, exp_avg_vec, exp_avg_sq_vec, neg_step_t, beta1, beta2,
                    epsilon, weight_decay, has_weight_decay, exp_avg_scales=None, exp_avg_sq_scales=None):
    if exp_avg_scales is not None or exp_avg_sq_scales is not None:
        raise NotImplementedError("optimizer_adamw: float8 moments (exp_avg_scales) are not supported by hpusim")
    n = len(weight_vec)
    if not (len(gradient_vec) == len(exp_avg_vec) == len(exp_avg_sq_vec) == n):
        raise RuntimeError("optimizer_adamw: gradient, weight and moment lists differ in length")
    if n == 0:
        return
    lists = (weight_vec, gradient_vec, exp_avg_vec, exp_avg_sq_vec)
    for lst in lists:
        _check_list("optimizer_adamw", lst)
    c = _Contig()
    w, m, v = c.write(weight_vec), c.write(exp_avg_vec), c.write(exp_avg_sq_vec)
    g = c.read(gradient_vec)
    head = [_scalar_on(neg_step_t, w[0]), _scalar_on(weight_decay, w[0])]
    _run_lists("optim.adamw", head, (w, g, m, v), [int(bool(has_weight_decay))],
               [float(beta1), float(beta2), float(epsilon)])
    c.finish()


_lib.impl("optimizer_adamw", optimizer_adamw, "HPU")


@torch.library.register_fake("hpu::optimizer_adamw")
def _optimizer_adamw_fake(*args, **kwargs):
    return None


# ------------------------------------------------------------------------------- SGD

_lib.define("optimizer_sgd(Tensor[] gradients, Tensor(a!)[] weights_in, Tensor(b!) learning_rate, "
            "float wd, float mom, float damp, bool nesterov) -> ()")
_lib.define("optimizer_sgd_momentum(Tensor[] gradients, Tensor(a!)[] weights_in, Tensor(b!)[] momentum_in, "
            "Tensor epoch_num, Tensor(c!) learning_rate, Tensor(d!) mom, float wd, float damp, "
            "bool nesterov) -> ()")


def optimizer_sgd(gradients, weights_in, learning_rate, wd, mom, damp, nesterov):
    if len(gradients) != len(weights_in):
        raise RuntimeError("optimizer_sgd: gradient and weight lists differ in length")
    if not weights_in:
        return
    _check_list("optimizer_sgd", weights_in)
    _check_list("optimizer_sgd", gradients)
    c = _Contig()
    w, g = c.write(weights_in), c.read(gradients)
    _run_lists("optim.sgd", [_scalar_on(learning_rate, w[0])], (w, g), [0],
               [float(wd), float(damp), float(bool(nesterov))])
    c.finish()


def optimizer_sgd_momentum(gradients, weights_in, momentum_in, epoch_num, learning_rate, mom, wd, damp,
                           nesterov):
    if not (len(gradients) == len(weights_in) == len(momentum_in)):
        raise RuntimeError("optimizer_sgd_momentum: gradient, weight and momentum lists differ in length")
    if not weights_in:
        return
    for lst in (weights_in, gradients, momentum_in):
        _check_list("optimizer_sgd_momentum", lst)
    c = _Contig()
    w, b, g = c.write(weights_in), c.write(momentum_in), c.read(gradients)
    head = [_scalar_on(learning_rate, w[0]), _scalar_on(mom, w[0]), _scalar_on(epoch_num, w[0], torch.int32)]
    _run_lists("optim.sgd", head, (w, g, b), [1], [float(wd), float(damp), float(bool(nesterov))])
    c.finish()


_lib.impl("optimizer_sgd", optimizer_sgd, "HPU")
_lib.impl("optimizer_sgd_momentum", optimizer_sgd_momentum, "HPU")


@torch.library.register_fake("hpu::optimizer_sgd")
def _optimizer_sgd_fake(*args, **kwargs):
    return None


@torch.library.register_fake("hpu::optimizer_sgd_momentum")
def _optimizer_sgd_momentum_fake(*args, **kwargs):
    return None


# ------------------------------------------------------------------------------ LAMB

_lib.define("optimizer_lamb_fused_norm(Tensor[] grad, float max_norm) -> Tensor")


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


_lib.impl("optimizer_lamb_fused_norm", optimizer_lamb_fused_norm, "HPU")


@torch.library.register_fake("hpu::optimizer_lamb_fused_norm")
def _optimizer_lamb_fused_norm_fake(grad, max_norm):
    return grad[0].new_empty(1)


def lamb_step(clip: torch.Tensor, weights, grads, exp_avgs, exp_avg_sqs, *, lr: float, beta1: float,
              beta2: float, beta3: float, eps: float, weight_decay: float, bias_correction1: float,
              bias_correction2: float, use_lamb: bool) -> None:
    """Both LAMB phases for one group in one Go call (hpusim's fusion of the bridge's
    optimizer_lamb_phase1 and optimizer_lamb_phase2)."""
    for lst in (weights, grads, exp_avgs, exp_avg_sqs):
        _check_list("optimizer_lamb", lst)
    c = _Contig()
    w, m, v = c.write(weights), c.write(exp_avgs), c.write(exp_avg_sqs)
    g = c.read(grads)
    _run_lists("optim.lamb", [clip], (w, g, m, v), [int(bool(use_lamb))],
               [lr, beta1, beta2, beta3, eps, weight_decay, bias_correction1, bias_correction2])
    c.finish()


# ------------------------------------------------------------------------------ LARS

_lib.define("optimizer_lars(Tensor[] params, Tensor(a!)[] grads, int[] skip_masks, float eeta, "
            "float weight_decay, float eps, Tensor lr) -> ()")


def optimizer_lars(params, grads, skip_masks, eeta, weight_decay, eps, lr):
    if not (len(params) == len(grads) == len(skip_masks)):
        raise RuntimeError("optimizer_lars: params, grads and skip_masks differ in length")
    if not params:
        return
    _check_list("optimizer_lars", params)
    _check_list("optimizer_lars", grads)
    c = _Contig()
    g, w = c.write(grads), c.read(params)
    _run_lists("optim.lars", [_scalar_on(lr, w[0])], (w, g), (), [float(eeta), float(weight_decay), float(eps)],
               per_tensor_ints=[int(s) for s in skip_masks])
    c.finish()


_lib.impl("optimizer_lars", optimizer_lars, "HPU")


@torch.library.register_fake("hpu::optimizer_lars")
def _optimizer_lars_fake(*args, **kwargs):
    return None


# -------------------------------------------------------------- ResourceApplyMomentum

_lib.define("optimizer_resource_apply_momentum(Tensor(a!)[] params_momentum_buf_list, Tensor[] dp_list, "
            "float momentum) -> ()")


def optimizer_resource_apply_momentum(params_momentum_buf_list, dp_list, momentum):
    pm = list(params_momentum_buf_list)
    if len(pm) != 2 * len(dp_list):
        raise RuntimeError("optimizer_resource_apply_momentum: expected [param, momentum_buf] pairs, "
                           "one per gradient")
    if not dp_list:
        return
    _check_list("optimizer_resource_apply_momentum", pm)
    _check_list("optimizer_resource_apply_momentum", dp_list)
    c = _Contig()
    w, b = c.write(pm[0::2]), c.write(pm[1::2])
    d = c.read(dp_list)
    _run_lists("optim.resource_apply_momentum", [], (w, b, d), (), [float(momentum)])
    c.finish()


_lib.impl("optimizer_resource_apply_momentum", optimizer_resource_apply_momentum, "HPU")


@torch.library.register_fake("hpu::optimizer_resource_apply_momentum")
def _optimizer_ram_fake(*args, **kwargs):
    return None


# ------------------------------------------------------------------------------- EMA

_lib.define("optimizer_ema(Tensor[] model_inputs, Tensor(a!)[] updated_ema, Tensor decay) -> ()")


def optimizer_ema(model_inputs, updated_ema, decay):
    if len(model_inputs) != len(updated_ema):
        raise RuntimeError("optimizer_ema: model and ema lists differ in length")
    if not updated_ema:
        return
    _check_list("optimizer_ema", updated_ema)
    _check_list("optimizer_ema", model_inputs)
    c = _Contig()
    e, m = c.write(updated_ema), c.read(model_inputs)
    _run_lists("optim.ema", [_scalar_on(decay, e[0])], (e, m))
    c.finish()


_lib.impl("optimizer_ema", optimizer_ema, "HPU")


@torch.library.register_fake("hpu::optimizer_ema")
def _optimizer_ema_fake(*args, **kwargs):
    return None


# -------------------------------------------------------------------------- clip norm

_lib.define("fused_clip_norm(Tensor(a!)[] grad, Tensor max_norm, float norm_type) -> Tensor")


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


_lib.impl("fused_clip_norm", fused_clip_norm, "HPU")


@torch.library.register_fake("hpu::fused_clip_norm")
def _fused_clip_norm_fake(grad, max_norm, norm_type):
    return grad[0].new_empty(())


# --------------------------------------------------------------------------- Adagrad

def adagrad_step(weights, grads, sums, *, clr: float, weight_decay: float, eps: float) -> None:
    """One fused Adagrad update of a group (the bridge's `_hpex_C.fused_adagrad`)."""
    for lst in (weights, grads, sums):
        _check_list("fused_adagrad", lst)
    c = _Contig()
    w, s = c.write(weights), c.write(sums)
    g = c.read(grads)
    _run_lists("optim.adagrad", [], (w, g, s), (), [clr, weight_decay, eps])
    c.finish()


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
