"""habana_frameworks.torch.hpex.movingavrg: FusedEMA."""
from .FusedEMA import FusedEMA

__all__ = ["FusedEMA"]
