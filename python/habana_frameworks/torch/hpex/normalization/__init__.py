"""habana_frameworks.torch.hpex.normalization: FusedClipNorm, FusedRMSNorm, RmsNormBwdMode."""
from .FusedClipNorm import FusedClipNorm
from .FusedRMSNorm import FusedRMSNorm, RmsNormBwdMode

__all__ = ["FusedClipNorm", "FusedRMSNorm", "RmsNormBwdMode"]
