"""The write fence of a PostgreSQL store: a replaced holder's writes are refused.

Why: on a cluster an agent's runtime can be restarted on another node while
the old one still runs (its node cut off from the cluster, not dead).  The
session is fenced by its version check (:mod:`actormem.cluster._host`), but
the long-term store is written by the agent's calls and by background
writers (the recorder's batches, the compressor's offloads, the journal,
access counters): without a fence of its own, the old incarnation's writes
land in the shared store after the new one took the agent over.

How: one row per holder in ``agent_fences`` (``holder`` text, ``epoch``
bigint; schema version 12), in the store's own database (the sessions may be
in another).  A holder takes the fence with :meth:`PgFence.fence`: in one
transaction, the fence's advisory lock (exclusive), then an upsert that
raises the stored epoch to its own (``greatest``: never lowers) and answers
the stored one.  From then on every write transaction of that store object
takes the same lock shared (in the statement that reads its transaction id,
which :mod:`actormem.store._pg_txn` runs anyway), then reads the row ``FOR
SHARE`` in a statement of its own, and goes on only while the epoch is still
its own; both locks are held to its commit.  So PostgreSQL orders each write
and a take-over: a write that holds the lock commits before the take-over
can raise the epoch; a write that comes after waits for the take-over's
commit, then reads the newer epoch and rolls back.  Each write either
committed before the take-over or is refused; never after.  The advisory
lock is what keeps a busy holder from starving the take-over: PostgreSQL
queues a lock request behind a conflicting one already waiting, whereas new
``FOR SHARE`` readers of a row join the ones holding it past a waiting
``UPDATE`` (measured: three writers in a loop held a take-over off for 80 s).
The row lock makes a hand-written ``UPDATE agent_fences`` (without the
advisory lock) safe too.

A refused write raises :class:`StoreFencedError` (a :class:`StoreError`
naming the holder and both epochs); nothing of it is committed.  The store
then knows itself replaced (:attr:`PgFence.fenced_out`) and refuses every
later write at once, without a transaction: the stored epoch never goes back
down, so a retry could never succeed (the recorder does not retry it).

Access counters (read-side bookkeeping of retrievals that did happen) go
through the same funnel and are fenced too, but a refused counter write is
dropped, not raised or kept for the next flush: a replaced holder's counts
are not worth an error, and a flusher thread retrying them would loop.

Not fenced: a store never told a fence (any process outside a cluster pays
nothing, and is not checked against one), reads, and the bookkeeping that is
no one's data (approximate-index builds, planner statistics, trimming the
change feed).  DuckDB stores have no fence: one process holds the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import structlog

from actormem.store._types import InvalidMemoryError, StoreError

__all__ = ["FENCE_LOCK", "FENCE_READ", "PgFence", "StoreFencedError", "add_fences"]

log = structlog.get_logger(__name__)

#: The first statements of a fenced store's write transaction: its id and the fence's
#: lock (shared), then the holder's epoch -- in a statement of its own, whose snapshot
#: is taken once the lock is held (one statement's would be older than a take-over that
#: committed while it waited).
FENCE_LOCK: Final = (
    "SELECT pg_current_xact_id(), pg_advisory_xact_lock_shared(hashtextextended(%s, 0))"
)
FENCE_READ: Final = "SELECT epoch FROM agent_fences WHERE holder = %s FOR SHARE"
#: A take-over: the fence's lock (exclusive), then the epoch raised (never lowered).
_TAKE_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_RAISE: Final = (
    "INSERT INTO agent_fences AS f (holder, epoch) VALUES (%s, %s) "
    "ON CONFLICT (holder) DO UPDATE SET epoch = greatest(f.epoch, excluded.epoch), "
    "raised_at = now() RETURNING epoch"
)

#: Longest holder name: a key, not a document.
_MAX_HOLDER: Final = 1000


def _lock_text(holder: str) -> str:
    """The text whose ``hashtextextended`` is the fence's advisory lock (apart from the
    namespaces' write locks, :meth:`~actormem.store.PostgresStore.lock_name`)."""
    return "actormem.fence:" + holder


class StoreFencedError(StoreError):
    """A write of a fenced store was refused: a newer holder of its fence took over.

    Attributes:
        holder: the fence's holder (for a cluster agent: its namespace and session id).
        epoch: this store's epoch.
        newer: the epoch stored now (``None``: the fence row is gone).
    """

    def __init__(self, message: str, holder: str, epoch: int, newer: int | None) -> None:
        super().__init__(message)
        self.holder, self.epoch, self.newer = holder, epoch, newer


def add_fences(conn: Any, dim: int) -> None:
    """Schema step 11 -> 12: the ``agent_fences`` table (see the module docstring)."""
    conn.execute(
        "CREATE TABLE agent_fences (holder text PRIMARY KEY, epoch bigint NOT NULL, "
        "raised_at timestamptz NOT NULL DEFAULT now())"
    )


class PgFence:
    """The fence of :class:`~actormem.store.PostgresStore` (a mixin; module docstring)."""

    url: str
    #: (holder, epoch) this store's writes are fenced by; None: not fenced
    _fence: tuple[str, int] | None = None
    #: the newer epoch a refused write found (None: never refused)
    _fenced_out: int | None = None

    if TYPE_CHECKING:  # the store's own (PostgresStore, PgConnections)

        def _check_open(self) -> None: ...

        def _connect(self) -> Any: ...

        def _say(self, exc: BaseException) -> str: ...

    def fence(self, holder: str, epoch: int) -> None:
        """Take the fence of ``holder`` at ``epoch``; fence this store's writes by it.

        Raises the stored epoch of ``holder`` to ``epoch`` (it never goes
        down) in one committed statement, which waits for the writes of
        the fence's previous epoch still in flight.  From then on every
        write transaction of this store object commits only while the stored
        epoch is still ``epoch`` (module docstring).

        Raises:
            StoreFencedError: the stored epoch is already higher (a newer holder
                took over; nothing changed and this store stays as it was).
            InvalidMemoryError: ``holder`` is empty or too long, or ``epoch`` is
                not a positive int.
            StoreError: the database cannot be reached.
        """
        self._check_open()
        if (
            not isinstance(holder, str)
            or not holder
            or len(holder) > _MAX_HOLDER
            or "\x00" in holder
        ):
            raise InvalidMemoryError(
                f"a fence's holder must be a non-empty str of at most {_MAX_HOLDER} characters "
                "without NUL"
            )
        if not isinstance(epoch, int) or isinstance(epoch, bool) or not 0 < epoch < 2**63:
            raise InvalidMemoryError(f"a fence's epoch must be a positive int, got {epoch!r}")
        conn = self._connect()
        try:
            with conn.transaction():
                conn.execute(_TAKE_LOCK, (_lock_text(holder),))
                row = conn.execute(_RAISE, (holder, epoch)).fetchone()
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(
                f"cannot take the write fence of {holder!r} in {self.url}: {self._say(exc)}"
            ) from None
        finally:
            conn.close()
        stored = int(row[0])
        if stored > epoch:
            raise StoreFencedError(
                f"the write fence of {holder!r} in {self.url} is at epoch {stored}, newer than "
                f"{epoch}: a newer holder took over",
                holder,
                epoch,
                stored,
            )
        self._fence, self._fenced_out = (holder, epoch), None
        log.info("store.fenced", where=self.url, holder=holder, epoch=epoch)

    def fence_epoch(self, holder: str) -> int:
        """The epoch stored for ``holder`` (0: none was ever taken)."""
        self._check_open()
        conn = self._connect()
        try:
            row = conn.execute(
                "SELECT epoch FROM agent_fences WHERE holder = %s", (holder,)
            ).fetchone()
        except Exception as exc:
            raise StoreError(
                f"cannot read the write fence of {holder!r} in {self.url}: {self._say(exc)}"
            ) from None
        finally:
            conn.close()
        return 0 if row is None else int(row[0])

    @property
    def fenced_out(self) -> int | None:
        """The newer epoch that refused one of this store's writes (None: none was refused)."""
        return self._fenced_out

    def _refusal(self, what: str, newer: int | None) -> StoreFencedError:
        """The error of a refused write (and this store knows itself replaced from now on)."""
        assert self._fence is not None
        holder, epoch = self._fence
        if self._fenced_out is None:
            self._fenced_out = newer if newer is not None else epoch + 1
            log.error(
                "store.write_fenced_out", where=self.url, holder=holder, epoch=epoch, newer=newer
            )
        found = "is gone" if newer is None else f"is at epoch {newer}"
        return StoreFencedError(
            f"{what} in {self.url} was refused and nothing of it was written: the write fence "
            f"of {holder!r} {found}, and this store writes for epoch {epoch} -- a newer "
            "holder took over",
            holder,
            epoch,
            newer if newer is not None else self._fenced_out,
        )

    def _fence_params(self, what: str) -> tuple[str, str] | None:
        """The fence's lock text and holder (FENCE_LOCK's and FENCE_READ's parameter), or
        None when this store is not fenced.

        Raises:
            StoreFencedError: a write was refused before: so is this one, at once.
        """
        if self._fence is None:
            return None
        if self._fenced_out is not None:
            raise self._refusal(what, self._fenced_out)
        return _lock_text(self._fence[0]), self._fence[0]

    def _check_fence(self, what: str, stored: Any) -> None:
        """Raise the refusal unless ``stored`` (FENCE_READ's epoch) is this store's epoch."""
        assert self._fence is not None
        if stored is None or int(stored) != self._fence[1]:
            raise self._refusal(what, None if stored is None else int(stored))
