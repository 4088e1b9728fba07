"""Judging a low-precision hpu result against float64 when torch's CPU result is not the
reference: torch's CPU bfloat16 convolution without oneDNN's bf16 path (a CPU without
AVX-512, torch.ops.mkldnn._is_mkldnn_bf16_supported() False) rounds its column buffers and
partial sums to bfloat16, while the native kernels sum in float32 and round once, so on such
a machine the two differ beyond a bfloat16 tolerance with hpu the closer to float64."""
from __future__ import annotations

import torch


def cpu_bf16_conv_rounds_intermediates() -> bool:
    """True where torch's CPU bfloat16 convolution is its slow path (no oneDNN bf16)."""
    try:
        return not bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return True


def assert_no_further_from_float64(hpu: torch.Tensor, cpu: torch.Tensor, ref: torch.Tensor, what: str = "") -> None:
    """hpu's largest error against the float64 reference is at most 1.5x CPU's, plus one ulp of
    hpu's dtype at the reference's largest magnitude (hpu rounds once at the end)."""
    ref = ref.detach().double().cpu()
    eh = (hpu.detach().double().cpu() - ref).abs().max().item() if ref.numel() else 0.0
    ec = (cpu.detach().double().cpu() - ref).abs().max().item() if ref.numel() else 0.0
    ulp = torch.finfo(hpu.dtype).eps * (ref.abs().max().item() if ref.numel() else 0.0)
    assert eh <= 1.5 * ec + ulp + 1e-12, f"{what}: hpu {eh:.3e} vs CPU {ec:.3e} from float64 (ulp {ulp:.3e})"
