"""Short pauses in the library's long background work, so other threads get the GIL.

Why: a thread that wants the GIL -- an asyncio event loop's, say -- waits up
to the interpreter's switch interval (5 ms) before the thread running Python
is asked to let go, and when several threads run Python it can wait several
intervals.  The recorder, the compressor and the store's warm-up and applier
run Python for tens to hundreds of milliseconds at a time, so an application's
loop beside them ticked 10-60 ms late at its 99th percentile (issue 16,
``bench_runtime --loop-lag``).  Measured with threads spinning in Python beside
a 1 ms asyncio ticker: p99 28-92 ms without pauses, 7-10 ms with a 0.2 ms sleep
after each millisecond of work.

So the library's own background threads call :func:`mark_background` when
they start, and their long loops call :func:`pace` between units of work
(a message, a sentence, a text, a block of a file).  :func:`pace` does nothing
in any other thread (an application's thread calling the same code never
sleeps), and in a background thread sleeps :data:`PAUSE` once the thread has
been busy for :data:`EVERY` -- a thread that was idle (no call for longer than
:data:`IDLE`) starts a new stretch without pausing.  Nothing process-wide is
changed (the switch interval is the application's).
"""

from __future__ import annotations

import threading
import time
from typing import Final

__all__ = ["EVERY", "IDLE", "PAUSE", "is_background", "mark_background", "pace"]

#: Busy time after which a background thread pauses.
EVERY: Final = 0.001
#: The pause: long enough for a waiting thread to wake and take the GIL.
PAUSE: Final = 0.0002
#: A gap between two calls longer than this is taken for idleness (call sites
#: sit between units of work well under it).
IDLE: Final = 0.005

_local = threading.local()
_clock = time.perf_counter
_sleep = time.sleep


def mark_background() -> None:
    """Make :func:`pace` pause in the calling thread (a library-owned thread)."""
    now = _clock()
    _local.start = now
    _local.seen = now


def is_background() -> bool:
    """Whether the calling thread was marked with :func:`mark_background`."""
    return hasattr(_local, "start")


def pace() -> None:
    """Pause briefly if this background thread has been busy for :data:`EVERY`."""
    try:
        seen = _local.seen
    except AttributeError:
        return  # not a library background thread
    now = _clock()
    _local.seen = now
    if now - seen > IDLE:
        _local.start = now  # was idle: a new stretch of work
    elif now - _local.start >= EVERY:
        _sleep(PAUSE)
        _local.start = _local.seen = _clock()
