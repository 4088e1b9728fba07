"""The bridge's PT2E observers (`habana_frameworks.torch.core.observer`): per-tensor symmetric
fp8 observers whose scale is a power of two that Gaudi's fp8 hardware can apply.

Both record a running range during calibration and compute (scale, zero_point = 0) with

    s = max(absmax * 2**backoff_margin / half_range, eps),   half_range = (quant_max - quant_min) / 2

then align s to the hardware: round it up to a power of two, then up to a power of 2**4
(Gaudi2's exponent-bias steps), and clamp it into the scales the fp8 exponent biases
allow (float8_e4m3fn: 2**-8 .. 2**4; float8_e5m2: exactly 1), as the bridge does (it always
uses Gaudi2's table). Only fp8 dtypes, the per-tensor symmetric scheme and static
quantization are accepted, as in the bridge.
"""
from __future__ import annotations

import math

import torch
from torch.ao.quantization.observer import UniformQuantizationObserverBase

__all__ = ["AbsMaxObserver", "SimpleAbsMaxObserver"]

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
# Gaudi2's fp8 exponent biases per dtype; a bias b scales the dtype's range by 2**(default - b).
_GAUDI2_EXP_BIASES = {torch.float8_e4m3fn: (3, 7, 11, 15), torch.float8_e5m2: (15,)}
_DEFAULT_EXP_BIAS = {torch.float8_e4m3fn: 7, torch.float8_e5m2: 15}
_GAUDI2_SCALE_STEP = 4  # scales are powers of 2**4 on Gaudi2


def _hw_scale_bounds(dtype: torch.dtype) -> tuple[float, float]:
    scales = [2.0 ** (_DEFAULT_EXP_BIAS[dtype] - b) for b in _GAUDI2_EXP_BIASES[dtype]]
    return min(scales), max(scales)


def scale_to_pow2_hw(scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`scale` rounded up to a scale Gaudi2's fp8 hardware applies (see the module doc)."""
    lo, hi = _hw_scale_bounds(dtype)
    pow2 = torch.exp2(torch.ceil(torch.log2(scale)))
    step = torch.exp2(torch.ceil(torch.log2(pow2) / _GAUDI2_SCALE_STEP) * _GAUDI2_SCALE_STEP)
    return step.clamp(min=lo, max=hi)


class _Fp8ObserverBase(UniformQuantizationObserverBase):
    def __init__(self, dtype=torch.float8_e4m3fn, qscheme=torch.per_tensor_symmetric, reduce_range=False,
                 quant_min=None, quant_max=None, factory_kwargs=None, eps=torch.finfo(torch.float32).eps,
                 backoff_margin=0, is_dynamic=False, **kwargs) -> None:
        name = type(self).__name__
        if dtype not in _FP8:
            raise NotImplementedError(f"{name}: dtype only supports torch.float8_e5m2 and torch.float8_e4m3fn.")
        if qscheme != torch.per_tensor_symmetric:
            raise NotImplementedError(f"{name}: qscheme only supports torch.per_tensor_symmetric.")
        if reduce_range:
            raise NotImplementedError(f"{name}: reduce_range is not supported.")
        if is_dynamic:
            raise NotImplementedError(f"{name}: is_dynamic is not supported.")
        fmax = torch.finfo(dtype).max
        quant_min = -fmax if quant_min is None else quant_min
        quant_max = fmax if quant_max is None else quant_max
        if quant_min != -quant_max:
            raise ValueError(f"{name}: quant_min must be -quant_max (got {quant_min}, {quant_max})")
        # The base class checks integer bounds against the dtype's range; fp8 bounds are the
        # dtype's float range, so it is given the bounds after construction.
        super().__init__(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=None, quant_max=None,
                         factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic, **kwargs)
        self.quant_min, self.quant_max = quant_min, quant_max
        self.has_customized_qrange = True
        self.backoff_margin = backoff_margin

    def _absmax(self) -> torch.Tensor:
        raise NotImplementedError

    @torch.jit.export
    def calculate_qparams(self):
        """(scale, zero_point): the hardware-aligned scale of the recorded range, zero point 0."""
        absmax = self._absmax().to(torch.float32)
        half_range = float(self.quant_max - self.quant_min) / 2
        scale = absmax / half_range * (2.0 ** self.backoff_margin)
        scale = torch.max(scale, self.eps.to(scale.device))
        scale = scale_to_pow2_hw(scale, self.dtype)
        return scale, torch.zeros(scale.size(), dtype=torch.int64, device=scale.device)


class AbsMaxObserver(_Fp8ObserverBase):
    """Records the running min and max; the scale comes from max(-min, max) (min clipped to
    <= 0, max to >= 0)."""

    min_val: torch.Tensor
    max_val: torch.Tensor

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        fk = torch.nn.factory_kwargs(kwargs.get("factory_kwargs"))
        self.register_buffer("min_val", torch.tensor(math.inf, **fk))
        self.register_buffer("max_val", torch.tensor(-math.inf, **fk))

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.min_val.dtype)
        lo, hi = torch.aminmax(x)
        self.min_val.copy_(torch.min(lo, self.min_val.to(lo.device)))
        self.max_val.copy_(torch.max(hi, self.max_val.to(hi.device)))
        return x_orig

    def _absmax(self):
        lo = torch.clamp(self.min_val, max=0.0)
        hi = torch.clamp(self.max_val, min=0.0)
        return torch.max(-lo, hi)

    @torch.jit.export
    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    @torch.jit.export
    def reset_observer_state(self):
        self.min_val.fill_(math.inf)
        self.max_val.fill_(-math.inf)


class SimpleAbsMaxObserver(_Fp8ObserverBase):
    """Records the running maximum of |x|; the scale uses the full range (quant_max)."""

    abs_max_val: torch.Tensor

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        fk = torch.nn.factory_kwargs(kwargs.get("factory_kwargs"))
        self.register_buffer("abs_max_val", torch.tensor(-math.inf, **fk))

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(self.abs_max_val.dtype)
        cur = torch.amax(torch.abs(x))
        self.abs_max_val.copy_(torch.max(cur, self.abs_max_val.to(cur.device)))
        return x_orig

    def _absmax(self):
        return self.abs_max_val

    @torch.jit.export
    def calculate_qparams(self):
        # s = max(absmax * 2**margin / quant_max, eps): quant_max is half the symmetric range.
        return super().calculate_qparams()

    @torch.jit.export
    def extra_repr(self):
        return f"abs_max_val={self.abs_max_val}"

    @torch.jit.export
    def reset_observer_state(self):
        self.abs_max_val.fill_(-math.inf)
