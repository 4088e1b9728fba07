"""The compile backend's log, as the bridge's `Logger("PT_COMPILE")`: messages prefixed
`[PT_COMPILE]` into the hl_logger component PT_PYTHON (LOG_LEVEL_PT_PYTHON or
LOG_LEVEL_ALL: 1 debug, 2 info; ENABLE_CONSOLE=true prints them to stderr)."""
from __future__ import annotations

from ...utils import hl_logger

MODULE = "PT_PYTHON"
TRACE, DEBUG, INFO, WARN, ERROR = 0, 1, 2, 3, 4


class CompileLogger:
    def __init__(self, prefix: str = "PT_COMPILE"):
        self.prefix = f"[{prefix}] "

    def enabled(self, level: int) -> bool:
        return hl_logger.enabled(MODULE, level)

    def _log(self, level: int, msg: str, args: tuple) -> None:
        if hl_logger.enabled(MODULE, level):
            hl_logger.log(MODULE, level, self.prefix + (msg % args if args else msg))

    def debug(self, msg: str, *args) -> None:
        self._log(DEBUG, msg, args)

    def info(self, msg: str, *args) -> None:
        self._log(INFO, msg, args)

    def warn(self, msg: str, *args) -> None:
        self._log(WARN, msg, args)

    warning = warn

    def error(self, msg: str, *args) -> None:
        self._log(ERROR, msg, args)


logger = CompileLogger()
fx_graph_logger = CompileLogger("PT_COMPILE FX GRAPH")


def get_compile_backend_logger() -> CompileLogger:
    return logger


def get_fx_graph_logger() -> CompileLogger:
    return fx_graph_logger
