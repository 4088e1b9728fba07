"""hpu::ctc_loss_custom / ctc_loss_custom_backward (hpex CTCLoss) on the Go CTC kernel
(kernels/ctc.go), and hpu::custom_softmax (hpex CustomSoftmax) on the native softmax.

The CTC kernel works on float32 log-probabilities [T, N, C] and padded int64 targets
[N, S]; targets given concatenated (1-D) are padded on the host first, as the bridge's
kernel also reads lengths and targets from the host."""
from __future__ import annotations

import torch

from .. import _native
from .registry import NotNative, native

_lib = torch.library.Library("hpu", "FRAGMENT")

_NONE, _MEAN, _SUM = 0, 1, 2  # torch.nn._reduction.get_enum


def _host_operands(log_probs, targets, input_lengths, target_lengths):
    """(log_probs as float32 [T,N,C] on hpu, padded targets, lengths) for the kernel, and
    whether the input was unbatched."""
    unbatched = log_probs.dim() == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    if lp.dim() != 3:
        raise RuntimeError(f"ctc_loss: log_probs must be 2-D or 3-D, got {log_probs.dim()}-D")
    N = lp.shape[1]
    il = torch.as_tensor(input_lengths).to("cpu", torch.int64).reshape(-1)
    tl = torch.as_tensor(target_lengths).to("cpu", torch.int64).reshape(-1)
    if il.numel() != N or tl.numel() != N:
        raise RuntimeError(f"ctc_loss: expected {N} input and target lengths, got {il.numel()} and {tl.numel()}")
    tg = targets.to("cpu", torch.int64)
    if unbatched and tg.dim() == 1 and tl.numel() == 1:
        tg = tg.unsqueeze(0)
    if tg.dim() == 1:  # concatenated targets
        if int(tl.sum()) > tg.numel():
            raise RuntimeError("ctc_loss: target_lengths sum to more than the number of targets")
        smax = int(tl.max()) if N else 0
        padded = torch.zeros(N, smax, dtype=torch.int64)
        off = 0
        for n, ln in enumerate(tl.tolist()):
            padded[n, :ln] = tg[off:off + ln]
            off += ln
        tg = padded
    dev = log_probs.device
    return (lp.to(torch.float32).contiguous(), tg.contiguous().to(dev), il.to(dev), tl.to(dev), unbatched)


def ctc_loss_custom(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    """-> (loss reduced as `reduction` says, log_alpha [N, T, 2S+1] float32)."""
    lp, tg, il, tl, unbatched = _host_operands(log_probs, targets, input_lengths, target_lengths)
    T, N, _ = lp.shape
    nll = torch.empty(N, dtype=torch.float32, device=lp.device)
    alpha = torch.empty(N, T, 2 * tg.shape[1] + 1, dtype=torch.float32, device=lp.device)
    with torch.no_grad():
        _native.run("ctc_loss", [nll, alpha, lp, tg, il, tl], (int(blank),))
        if zero_infinity:
            nll = torch.where(torch.isinf(nll), torch.zeros_like(nll), nll)
        if reduction == _MEAN:
            loss = (nll / tl.clamp(min=1).to(nll.dtype)).mean()
        elif reduction == _SUM:
            loss = nll.sum()
        else:
            loss = nll[0] if unbatched else nll
    return loss.to(log_probs.dtype), alpha


def ctc_loss_custom_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood,
                             log_alpha, blank, reduction, zero_infinity):
    """d loss / d log_probs (the per-element likelihoods are read off log_alpha)."""
    lp, tg, il, tl, unbatched = _host_operands(log_probs, targets, input_lengths, target_lengths)
    N = lp.shape[1]
    with torch.no_grad():
        g = grad.to(torch.float32).reshape(-1)
        if reduction == _MEAN:
            scale = g.expand(N) / (N * tl.clamp(min=1).to(torch.float32))
        elif reduction == _SUM:
            scale = g.expand(N)
        else:
            scale = g.expand(N)
        scale = scale.contiguous()
        out = torch.empty_like(lp)
        _native.run("ctc_loss_bwd", [out, scale, lp, tg, il, tl, log_alpha.contiguous()],
                    (int(blank), int(bool(zero_infinity))))
    if unbatched:
        out = out.squeeze(1)
    return out.to(log_probs.dtype)


_lib.define("ctc_loss_custom(Tensor log_probs, Tensor targets, Tensor input_lengths, Tensor target_lengths, "
            "int blank, int reduction, bool zero_infinity) -> (Tensor, Tensor)")
_lib.define("ctc_loss_custom_backward(Tensor grad, Tensor log_probs, Tensor targets, Tensor input_lengths, "
            "Tensor target_lengths, Tensor neg_log_likelihood, Tensor log_alpha, int blank, int reduction, "
            "bool zero_infinity) -> Tensor")
_lib.impl("ctc_loss_custom", ctc_loss_custom, "HPU")
_lib.impl("ctc_loss_custom_backward", ctc_loss_custom_backward, "HPU")


@torch.library.register_fake("hpu::ctc_loss_custom")
def _ctc_fake(log_probs, targets, input_lengths, target_lengths, blank, reduction, zero_infinity):
    # The alpha width depends on the longest target (data): a dynamic size when tracing.
    N = log_probs.shape[1] if log_probs.dim() == 3 else 1
    width = torch.library.get_ctx().new_dynamic_size()
    loss_shape = (N,) if reduction == _NONE and log_probs.dim() == 3 else ()
    return (log_probs.new_empty(loss_shape),
            log_probs.new_empty((N, log_probs.shape[0], width), dtype=torch.float32))


@torch.library.register_fake("hpu::ctc_loss_custom_backward")
def _ctc_bwd_fake(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank,
                  reduction, zero_infinity):
    return torch.empty_like(log_probs)


# ------------------------------------------- aten::_ctc_loss / _ctc_loss_backward on hpu
# F.ctc_loss's composite calls these with 3-D log_probs (unbatched input is unsqueezed
# first) and lengths as int lists or tensors; the reduction happens in the composite.
# Anything the kernel does not take, or that torch rejects, goes to the CPU path, which
# raises torch's own messages.

def _aten_operands(log_probs, targets, input_lengths, target_lengths, blank):
    if log_probs.device.type != "hpu" or log_probs.dtype != torch.float32 or log_probs.dim() != 3:
        raise NotNative
    if targets.dtype not in (torch.int32, torch.int64) or targets.dim() not in (1, 2):
        raise NotNative
    T, N, C = log_probs.shape
    il = torch.as_tensor(input_lengths).to("cpu", torch.int64).reshape(-1)
    tl = torch.as_tensor(target_lengths).to("cpu", torch.int64).reshape(-1)
    if not 0 <= int(blank) < C or il.numel() != N or tl.numel() != N:
        raise NotNative
    if N and (bool((il < 0).any()) or int(il.max()) > T or bool((tl < 0).any())):
        raise NotNative
    smax = int(tl.max()) if N else 0
    tg = targets.to("cpu", torch.int64)
    if tg.dim() == 2:
        if tg.shape[0] != N or tg.shape[1] < smax:
            raise NotNative
        tg = tg[:, :smax].contiguous()
    else:
        if int(tl.sum()) > tg.numel():
            raise NotNative
        padded = torch.zeros(N, smax, dtype=torch.int64)
        off = 0
        for n, ln in enumerate(tl.tolist()):
            padded[n, :ln] = tg[off:off + ln]
            off += ln
        tg = padded
    if tg.numel() and (int(tg.min()) < 0 or int(tg.max()) >= C):
        raise NotNative  # labels outside the classes: torch's CPU kernel decides what that means
    dev = log_probs.device
    return log_probs.contiguous(), tg.to(dev), il.to(dev), tl.to(dev)


@native("aten::_ctc_loss", "aten::_ctc_loss.Tensor")
def _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    """-> (neg_log_likelihood [N], log_alpha [N, T, 2*max(target_lengths)+1]), float32."""
    lp, tg, il, tl = _aten_operands(log_probs, targets, input_lengths, target_lengths, blank)
    T, N, _ = lp.shape
    nll = torch.empty(N, dtype=torch.float32, device=lp.device)
    alpha = torch.empty(N, T, 2 * tg.shape[1] + 1, dtype=torch.float32, device=lp.device)
    if N:
        _native.run("ctc_loss", [nll, alpha, lp, tg, il, tl], (int(blank),))
    return nll, alpha


@native("aten::_ctc_loss_backward", "aten::_ctc_loss_backward.Tensor")
def _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha,
                       blank, zero_infinity=False):
    lp, tg, il, tl = _aten_operands(log_probs, targets, input_lengths, target_lengths, blank)
    T, N, _ = lp.shape
    if grad.device.type != "hpu" or log_alpha.device.type != "hpu" or log_alpha.dtype != torch.float32 \
            or tuple(log_alpha.shape) != (N, T, 2 * tg.shape[1] + 1):
        raise NotNative
    out = torch.empty_like(lp)
    if out.numel() == 0:
        return out
    scale = grad.to(torch.float32).reshape(-1).expand(N).contiguous()
    _native.run("ctc_loss_bwd", [out, scale, lp, tg, il, tl, log_alpha.contiguous()],
                (int(blank), int(bool(zero_infinity))))
    return out


# ------------------------------------------------------------------- custom softmax

def custom_softmax(input, flavor):
    """Softmax over the last dim (flavor 0: exact exp; 1: the device's non-LUT exp
    approximation — the same result here)."""
    if input.dtype != torch.bfloat16:
        raise RuntimeError(f"custom_softmax: only bfloat16 is supported, got {input.dtype}")
    if int(flavor) not in (0, 1):
        raise RuntimeError(f"custom_softmax: flavor must be 0 or 1, got {flavor}")
    return torch.softmax(input, -1)


_lib.define("custom_softmax(Tensor input, int flavor) -> Tensor")
_lib.impl("custom_softmax", custom_softmax, "HPU")
torch.library.register_fake("hpu::custom_softmax")(lambda input, flavor: torch.empty_like(input))
