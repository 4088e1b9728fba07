"""habana_frameworks.torch.hpex.kernels: FusedSDPA and the rotary position embedding
helpers, on native kernels."""
from .FusedSDPA import FusedSDPA

__all__ = ["FusedSDPA"]
