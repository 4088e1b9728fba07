"""`transformer_engine.distributed.activation_checkpointing()`: a context (and function decorator,
as optimum-habana applies it to the function it checkpoints) that tells TE modules they run
under activation checkpointing, where the recomputation in backward repeats the forward. The
flag is readable with `is_activation_checkpointing()`. hpusim's TE modules derive each step's
scales from earlier steps' amaxes only, so a repeated forward casts with the same scales; it
does add its amaxes to the history once more."""
from __future__ import annotations

import contextlib
import threading

_state = threading.local()


def is_activation_checkpointing() -> bool:
    return getattr(_state, "depth", 0) > 0


class activation_checkpointing(contextlib.ContextDecorator):  # noqa: N801  (TE's name)
    def __enter__(self):
        _state.depth = getattr(_state, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _state.depth -= 1
        return False
