"""Media operator nodes (`fn.ImageDecoder`, `fn.CropMirrorNorm`, ...): each needs the media
engine, so naming one raises MediaPipeUnavailable."""
from __future__ import annotations

from ._unavailable import unavailable


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise unavailable(f"mediapipe.fn.{name}")
