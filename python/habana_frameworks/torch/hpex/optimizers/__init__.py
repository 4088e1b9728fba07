"""habana_frameworks.torch.hpex.optimizers: the bridge's fused optimizers, each step one
multi-tensor Go call per parameter group."""
from .FusedAdagrad import FusedAdagrad
from .FusedAdamW import FusedAdamW
from .FusedLamb import FusedLamb
from .FusedLars import FusedLars
from .FusedResourceApplyMomentum import FusedResourceApplyMomentum
from .FusedSGD import FusedSGD
from . import distributed
from .MarkstepAdam import MarkstepAdam as Adam
from .MarkstepAdam import MarkstepAdamW as AdamW

__all__ = ["FusedAdagrad", "FusedAdamW", "FusedLamb", "FusedLars", "FusedResourceApplyMomentum", "FusedSGD",
           "Adam", "AdamW"]
