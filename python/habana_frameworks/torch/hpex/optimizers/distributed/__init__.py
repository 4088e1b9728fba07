"""habana_frameworks.torch.hpex.optimizers.distributed: the functional FusedAdamW that
torch.distributed's ZeroRedundancyOptimizer (overlap_with_ddp) drives through
register_functional_optim."""
from .FusedAdamW import FusedAdamW

__all__ = ["FusedAdamW"]
