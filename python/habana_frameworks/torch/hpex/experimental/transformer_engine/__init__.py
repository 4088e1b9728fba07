"""`habana_frameworks.torch.hpex.experimental.transformer_engine`: fp8 training on the
emulated device (`Linear`, `fp8_autocast`, `recipe.DelayedScaling`/`Format`,
`fp8.is_fp8_available`/`is_fp8_enabled`). The fp8 numerics are real: tensors are cast to
torch.float8_e4m3fn/e5m2 with per-tensor delayed scales and saturating casts (Gaudi2's E4M3
range is +-240, Gaudi3's +-448), and the GEMMs consume the fp8 values (see hpex.kernels.Fp8Ops).
"""
from . import distributed, fp8, recipe  # noqa: F401
from .attention import FusedAttention  # noqa: F401
from .fp8 import fp8_autocast, is_fp8_available, is_fp8_enabled  # noqa: F401
from .module import Linear  # noqa: F401
