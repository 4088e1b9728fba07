"""`habana_frameworks.mediapipe`, as far as clients touch it without Gaudi's media engine.

MediaPipe runs JPEG decoding, cropping and normalisation on the Gaudi2/Gaudi3 hardware media
decoder. hpusim does not emulate that engine: the modules, enums and base classes that
clients import and subclass at import time exist, and building a pipe raises
MediaPipeUnavailable with the reason, so clients take their torch DataLoader path instead.
"""
from __future__ import annotations

from ._unavailable import MediaPipeUnavailable  # noqa: F401
from . import fn  # noqa: F401
from .mediapipe import MediaPipe  # noqa: F401
