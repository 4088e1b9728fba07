"""Op dispatch for the HPU key: native ops lowered to the Go core, CPU fallback for the rest.

Lowering modules register themselves with `registry.native`; importing this package
imports them all.
"""
from . import registry  # noqa: F401
from . import memory_ops  # noqa: F401
from . import elementwise  # noqa: F401
from . import reduction  # noqa: F401
from . import linalg  # noqa: F401
from . import nn_ops  # noqa: F401
from . import index_ops  # noqa: F401
from . import random_ops  # noqa: F401
from . import hpex_ops  # noqa: F401
from . import hpex_attention  # noqa: F401
from . import hpex_embedding_bag  # noqa: F401
from . import hpex_ctc  # noqa: F401
from . import elementwise_more  # noqa: F401
from . import shape_ops  # noqa: F401
from . import special_ops  # noqa: F401
from . import pointwise_ops  # noqa: F401
from . import nn_more_ops  # noqa: F401
from . import nn_composite_ops  # noqa: F401
from . import distribution_ops  # noqa: F401
from . import reduction_more  # noqa: F401
from . import index_more  # noqa: F401
from . import scan_ops  # noqa: F401
from . import margin_loss_ops  # noqa: F401
from . import rrelu_ops  # noqa: F401
from . import range_factories  # noqa: F401
from . import conv_ops  # noqa: F401
from . import sampling_ops  # noqa: F401
from . import segment_ops  # noqa: F401
from . import selection_ops  # noqa: F401
from . import weight_norm_ops  # noqa: F401
from . import randperm_ops  # noqa: F401
from . import torchvision_ops  # noqa: F401
