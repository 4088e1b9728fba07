"""`habana_frameworks.torch.dynamo.compile_backend`: torch.compile(backend="hpu_backend").

backends (registration), config (options and env flags), decomposition, partition_fn,
shared_layer (placement), passes, recipe_compiler (cluster run time), compilers,
experimental (compiled autograd)."""
from __future__ import annotations

import os

from .._env_flags import truthy

if truthy(os.getenv("PT_HPU_ENABLE_COMPILED_AUTOGRAD")):
    from .experimental import enable_compiled_autograd

    enable_compiled_autograd()
