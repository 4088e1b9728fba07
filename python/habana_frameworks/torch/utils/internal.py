"""Mode helpers shared by the package (as the bridge's utils.internal)."""
from __future__ import annotations

import functools
import logging
import os

logger = logging.getLogger(__name__)

# Read once: changing PT_HPU_LAZY_MODE after import has no effect, as on Gaudi.
_LAZY_REQUESTED = os.getenv("PT_HPU_LAZY_MODE", "0").strip() not in ("0", "")


def lazy_requested() -> bool:
    """True when the user asked for lazy mode (PT_HPU_LAZY_MODE=1) at import."""
    return _LAZY_REQUESTED


def is_lazy() -> bool:
    """Whether ops are accumulated into graphs (PT_HPU_LAZY_MODE=1 at import)."""
    return _LAZY_REQUESTED


def lazy_only(func):
    """Decorator for lazy-only APIs: in eager mode they are silent no-ops, and importing
    them logs the bridge's one-time warning."""
    if is_lazy():
        return func
    logger.warning(
        "Calling %s function does not have any effect. It's lazy mode only functionality. "
        "(warning logged once)", func.__name__)

    @functools.wraps(func)
    def non_lazy_wrapper(*args, **kwargs):
        return None

    return non_lazy_wrapper
