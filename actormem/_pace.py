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

One turn at a time: a pause alone did not hand the GIL to the loop when
several paced threads were busy at once (the recorder's rules, the
compressor's token counts, the model load of the store's warm-up): at each
pause the GIL went to whichever waiter woke first, as often another paced
thread as the loop, so the loop waited through several of their
milliseconds (p99 11 ms on an idle machine; at each late tick the stacks
showed up to three threads at their ``pace()``).  So paced work takes a *turn*, one background
thread at a time: :func:`pace` takes it (waiting without the GIL while
another background thread holds it), a thread pauses *holding* it -- so
during the pause no other paced thread wants the GIL and it goes to a
thread outside the library's paced work, such as the application's loop --
and after the pause hands it to the longest-waiting background thread, if
any.  :func:`rest` gives it up when a unit of work ends (an actor's
message, an applier step) or before the thread waits for another one.  A
holder that has not called :func:`pace` for :data:`LAPSE` (blocked, in a
long C call, or done without calling :func:`rest`) loses the turn to the
next thread that asks, so no thread waits long on a holder that is not
running paced work, and two threads waiting on each other cannot deadlock
on it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Final

__all__ = [
    "EVERY",
    "IDLE",
    "LAPSE",
    "PAUSE",
    "PIECE",
    "holds_turn",
    "is_background",
    "mark_background",
    "pace",
    "pieces",
    "rest",
]

#: Busy time after which a background thread pauses.
EVERY: Final = 0.001
#: The pause: long enough for a waiting thread to wake and take the GIL.
PAUSE: Final = 0.0002
#: A gap between two calls longer than this is taken for idleness (call sites
#: sit between units of work well under it).
IDLE: Final = 0.005
#: A turn whose holder has not called :func:`pace` for this long is free.
LAPSE: Final = 0.002
#: Characters per slice of :func:`pieces`: one C call (``split``, ``casefold``,
#: a regex ``findall``) over 8k characters holds the GIL well under a millisecond.
PIECE: Final = 1 << 13

_local = threading.local()
_clock = time.perf_counter
_sleep = time.sleep


class _Turn:
    """Which background thread runs paced work, since when, and who waits for it."""

    __slots__ = ("holder", "queue", "seen")

    def __init__(self) -> None:
        self.holder: int | None = None
        self.seen = 0.0  # the holder's last pace() (or when it got the turn)
        self.queue: deque[int] = deque()  # waiting threads, longest-waiting first


_turn = _Turn()
_turn_cond = threading.Condition(threading.Lock())

#: Called first by :func:`pace` in a background thread when set (the loop-lag
#: probe, ``benchmarks/_lag_probe.py``, times the work between two calls).
_observer: Callable[[], None] | None = None


def mark_background() -> None:
    """Make :func:`pace` pause in the calling thread (a library-owned thread)."""
    now = _clock()
    _local.start = now
    _local.seen = now
    _local.me = threading.get_ident()


def is_background() -> bool:
    """Whether the calling thread was marked with :func:`mark_background`."""
    return hasattr(_local, "start")


def holds_turn() -> bool:
    """Whether the calling thread holds the turn (see the module docstring)."""
    return _turn.holder == threading.get_ident()


def _take(me: int) -> bool:
    """Take the turn, waiting (GIL released) while another thread runs paced work.

    Returns whether it waited.
    """
    with _turn_cond:
        queued = False
        while True:
            holder = _turn.holder
            now = _clock()
            left = LAPSE - (now - _turn.seen)
            if holder == me:
                break  # handed over by the holder
            if holder is None or left <= 0:
                _turn.holder = me  # free, or its holder stopped pacing
                break
            if not queued:
                _turn.queue.append(me)
                queued = True
            _turn_cond.wait(left)
        if queued:
            with contextlib.suppress(ValueError):
                _turn.queue.remove(me)
        _turn.seen = _clock()
        return queued


def _give(me: int) -> None:
    """Hand the turn to the longest-waiting thread (or free it) if ``me`` holds it."""
    with _turn_cond:
        if _turn.holder != me:
            return
        if _turn.queue:
            _turn.holder = _turn.queue.popleft()
            _turn.seen = _clock()
            _turn_cond.notify_all()
        else:
            _turn.holder = None


def pace() -> None:
    """Pause briefly if this background thread has been busy for :data:`EVERY`."""
    try:
        seen = _local.seen
    except AttributeError:
        return  # not a library background thread
    if _observer is not None:
        _observer()
    me: int = _local.me
    now = _clock()
    _local.seen = now
    if now - seen > IDLE:
        _local.start = now  # was idle: a new stretch of work
    elif now - _local.start >= EVERY:
        _sleep(PAUSE)  # holding the turn: no other paced thread wants the GIL now
        if _turn.queue:
            _give(me)
        _take(me)
        _local.start = _local.seen = _clock()
        return
    if _turn.holder == me:
        _turn.seen = now
    elif _take(me):
        _local.start = _local.seen = _clock()  # waited: a new stretch


def rest() -> None:
    """End this thread's stretch of paced work: give up the turn if it holds it."""
    me = getattr(_local, "me", None)
    if me is not None and _turn.holder == me:
        _give(me)


def pieces(text: str, size: int = PIECE) -> Iterator[str]:
    """``text`` in consecutive slices of about ``size`` characters, with :func:`pace` between.

    Each slice after the first starts at an ASCII space, so no run of
    non-space characters (a word, a token of ``[^\\W_]+``) is cut in two: a
    per-character transformation (``casefold``) or a split on whitespace or on
    non-word characters gives, slice by slice, what it gives for the whole
    text.  A text of ``size`` characters or fewer is one slice.  Why: one C
    call over the 343k characters of an offloaded conversation held the GIL
    for 5-20 ms (issue 16, ``bench_runtime --loop-lag-probe``).
    """
    start, end = 0, len(text)
    while end - start > size:
        cut = text.find(" ", start + size)
        if cut < 0:
            break
        yield text[start:cut]
        pace()
        start = cut
    yield text[start:] if start else text
