"""What the store's shared mixins call on the backend.

Why a module of its own: :class:`~actormem.store._base_maintenance.Maintenance`
and :class:`~actormem.store._base_files.Transfer` both plan writes and hand
them to the backend; the two calls they share are declared here once (for
the type checker only: :class:`~actormem.store._base.StoreBase` defines them
and each backend implements them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from actormem.store._planning import Planner
from actormem.store._records import Batch
from actormem.store._types import Namespace

__all__ = ["BackendHooks"]

T = TypeVar("T")


class BackendHooks:
    """``_check_open`` and ``_write``, as the mixins see them."""

    if TYPE_CHECKING:

        def _check_open(self) -> None: ...

        def _write(
            self,
            what: str,
            plan: Callable[[Planner, float, Batch], T],
            *,
            lock: Namespace | None = None,
        ) -> T: ...
