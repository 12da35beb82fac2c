"""A recorder batch written so that one refused memory does not lose the others.

Kept apart from the recorder actor (:mod:`actormem.actors.recorder`), which
is past the size its module should have: this is the whole of what happens
when the store refuses a batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from actormem.store import NewMemory, StoreError, StoreFencedError, WriteResult
from actormem.store._types import Namespace

__all__ = ["write_each"]

log = structlog.get_logger("actormem.recorder")


def write_each(
    store: Any,
    ns: Namespace,
    items: list[NewMemory],
    write: Callable[[Callable[[], list[WriteResult]]], list[WriteResult]],
) -> tuple[list[WriteResult | None], list[str]]:
    """Write ``items`` as one batch; if the store refuses the batch, write them one by one.

    One memory the database refuses (a value past one of its limits) failed
    the whole batch, and with it the innocent turns and facts written beside
    it.  Written one at a time, the others are recorded; a refused one is
    tried once more after the rest, and its place in the results is ``None``
    with the store's reason in the second list.  When nothing can be written
    at all (the store is down), the batch's error is raised: nothing was
    refused, everything is still to record.  ``write`` runs the batch with the
    recorder's own retry.  A fenced store's refusal (:class:`StoreFencedError`: a
    newer incarnation of the agent took over) is raised at once: no memory of
    this holder will ever be written again, one by one or not.
    """
    try:
        return list(write(lambda: store.add_many(ns, items))), []
    except StoreError as exc:
        if len(items) == 1 or isinstance(exc, StoreFencedError):
            raise
        first: StoreError = exc
    log.warning("recorder.batch_split", items=len(items), error=repr(first))
    results: list[WriteResult | None] = []
    failed: list[int] = []
    for i, item in enumerate(items):
        try:
            results.append(store.add_many(ns, [item])[0])
        except StoreError:
            results.append(None)
            failed.append(i)
    if len(failed) == len(items):
        raise first
    refused: list[str] = []
    for i in failed:
        try:  # once more, now that the rest went in: a passing outage is no refusal
            results[i] = store.add_many(ns, [items[i]])[0]
        except StoreError as again:
            item = items[i]
            refused.append(f"{item.kind} #{i + 1} of {len(item.content)} characters: {again}")
    return results, refused
