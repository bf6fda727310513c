"""Pause the cyclic garbage collector while a trial loads many small objects at once.

Loading index files creates hundreds of thousands of small containers; every one of them
triggers collector passes that walk everything already loaded, which costs more than the
parsing itself on large trials. Nothing built here forms reference cycles.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the collector for the block; nested and concurrent uses re-enable it once."""
    global _depth
    with _lock:
        was_enabled = _depth > 0 or gc.isenabled()
        _depth += 1
        gc.disable()
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and was_enabled:
                gc.enable()
