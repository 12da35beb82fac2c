"""Which rows a search looks at: namespaces, filters, tags and episode links.

A scope is the set of live rows inside a namespace (with optional filters);
the namespace postings make a small scope cost what it holds, and a large
one is one pass over the code arrays, cached until the rows change.  Episode
links (consecutive episodes of one namespace) are what the hybrid search's
context blending reads; they are cached the same way.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from actormem.store._index_rows import F32, I64, IndexRows, Links
from actormem.store._types import Namespace, SearchFilters

__all__ = ["ScopeSearch", "with_context"]

_NS_NAMES: Final = ("user_id", "agent_id", "run_id", "session_id")


class ScopeSearch(IndexRows):
    """Rows of a namespace and filters; episode links within them."""

    def scope_rows(self, namespace: Namespace, filters: SearchFilters | None = None) -> I64:
        """Rows of live memories inside ``namespace`` that pass ``filters``."""
        with self._lock:
            return self._scope_rows(namespace, filters)

    def exact_rows(self, key: tuple[str, str, str, str]) -> I64:
        """Rows of live memories written into exactly this namespace key, ascending.

        Every write's near-duplicate check asks this for its own key; the
        key's rows are kept after the first ask (``add`` extends them), so a
        later ask is one gather of their liveness instead of intersecting the
        four fields' postings (~20 us of a single add's ~400 us of Python).
        """
        with self._lock:
            codes = []
            for field, value in enumerate(key):
                code = self._interners[field].get(value)
                if code < 0:
                    return np.zeros(0, dtype=np.int64)
                codes.append(code)
            code4 = tuple(codes)
            kept = self._exact_rows.get(code4)
            if kept is None:
                found = self._rows_matching(list(enumerate(codes)))
                self._exact_rows[code4] = array("q", found.tobytes())
                return found
            # A view of ``kept`` only for this gather: an array exporting its
            # buffer cannot grow (the next ``add``), so none is handed out.
            rows = np.frombuffer(kept, dtype=np.int64)
            live: I64 = rows[self._alive[rows]]
            del rows
            return live

    def _rows_matching(self, fields: list[tuple[int, int]]) -> I64:
        n = self._n
        if not fields:
            return np.flatnonzero(self._alive[:n]).astype(np.int64, copy=False)
        sizes = []
        for field, code in fields:
            posting = self._ns_rows[field].get(code)
            if posting is None:
                return np.zeros(0, dtype=np.int64)
            sizes.append((len(posting), field, code))
        sizes.sort()
        _, field0, code0 = sizes[0]
        base = self._ns_rows[field0][code0]
        if len(base) * 4 > n:
            # A large scope: a pass over every row, so its result is cached until
            # the next change of the rows (searches in one scope repeat).
            cache_key = tuple(fields)
            cached = self._scope_cache.get(cache_key)
            if cached is not None and cached[0] == self._version:
                return cached[1]
            mask = self._alive[:n].copy()
            for field, code in fields:
                mask &= self._ns[field, :n] == code
            found = np.flatnonzero(mask).astype(np.int64, copy=False)
            found.flags.writeable = False
            if len(self._scope_cache) >= 2:
                self._scope_cache.pop(next(iter(self._scope_cache)))
            self._scope_cache[cache_key] = (self._version, found)
            return found
        rows = np.frombuffer(base, dtype=np.int64).copy()
        keep = self._alive[rows]
        if len(fields) == len(self._ns):  # an exact key: one gather of every field's codes
            codes = np.array([code for _, code in sorted(fields)], dtype=self._ns.dtype)
            keep &= (self._ns.take(rows, axis=1) == codes[:, None]).all(axis=0)
        else:
            for _, field, code in sizes[1:]:
                keep &= self._ns[field, rows] == code
        result: I64 = rows[keep]
        return result

    def _scope_rows(self, namespace: Namespace, filters: SearchFilters | None) -> I64:
        wanted: dict[int, str] = {}
        for field, name in enumerate(_NS_NAMES):
            value = getattr(namespace, name)
            if value is not None:
                wanted[field] = value
        if filters is not None:
            for field, value in (
                (1, filters.agent_id),
                (2, filters.run_id),
                (3, filters.session_id),
            ):
                if value is None:
                    continue
                if wanted.get(field, value) != value:
                    return np.zeros(0, dtype=np.int64)
                wanted[field] = value
        fields: list[tuple[int, int]] = []
        for field, value in wanted.items():
            code = self._interners[field].get(value)
            if code < 0:
                return np.zeros(0, dtype=np.int64)
            fields.append((field, code))
        rows = self._rows_matching(fields)
        if filters is None or rows.size == 0:
            return rows
        keep = np.ones(rows.size, dtype=bool)
        if filters.kinds is not None:
            codes = [self._kinds.get(k) for k in filters.kinds]
            keep &= np.isin(self._kind[rows], np.asarray(codes, dtype=np.int32))
        if filters.tags_any is not None:
            tagged = self._tag_mask(filters.tags_any, any_of=True)
            keep &= tagged[rows]
        if filters.tags_all is not None:
            tagged = self._tag_mask(filters.tags_all, any_of=False)
            keep &= tagged[rows]
        if filters.created_after is not None:
            keep &= self._created[rows] >= filters.created_after
        if filters.created_before is not None:
            keep &= self._created[rows] < filters.created_before
        if filters.min_importance is not None:
            keep &= self._importance[rows] >= filters.min_importance
        result: I64 = rows[keep]
        return result

    def _tag_mask(self, tags: Sequence[str], *, any_of: bool) -> npt.NDArray[np.bool_]:
        n = self._n
        acc = np.zeros(n, dtype=bool) if any_of else np.ones(n, dtype=bool)
        for tag in tags:
            mask = np.zeros(n, dtype=bool)
            posting = self._tag_rows.get(tag)
            if posting is not None:
                rows = np.frombuffer(posting, dtype=np.int64)
                mask[rows] = True
                del rows
            # A row whose tag was later removed keeps its posting entry; check the record.
            for row in np.flatnonzero(mask):
                rec = self._records[int(row)]
                if rec is None or tag not in rec.tags:
                    mask[row] = False
            if any_of:
                acc |= mask
            else:
                acc &= mask
        return acc

    def _episode_links(self, namespace: Namespace, rows: I64, *, cache: bool) -> Links:
        """Positions ``(a, b)`` in ``rows`` of consecutive episodes (``a`` added just before ``b``).

        Two episodes of one concrete namespace are linked when no other
        episode of that namespace lies between them in the index (the order
        they were added in, which a rebuild keeps: it reads rows by creation
        time, ties in insertion order).  Memories of other kinds, and
        episodes of other namespaces of the scope, between them do not break
        the link.  Cached per scope until the index changes (``cache``: the
        scope has no filters).

        Returns:
            ``(before, after, before2, after2)``: ``before[i]`` is the
            episode just before ``after[i]``; ``before2[i]`` the one two
            episodes before ``after2[i]``.
        """
        key = namespace.key()
        if cache:
            hit = self._links_cache.get(key)
            if hit is not None and hit[0] == self._version:
                return hit[1]
        empty = np.zeros(0, dtype=np.int64)
        before, after = empty, empty
        code = self._kinds.get("episode")
        if code >= 0:
            ep = np.flatnonzero(self._kind[rows] == code)
            if ep.size >= 2:
                # Fields the scope leaves open: its rows may differ in them.
                codes = [self._ns[f, rows[ep]] for f, value in enumerate(key) if not value]
                if codes:  # group by concrete namespace, in row order within each
                    ep = ep[np.lexsort((ep, *codes[::-1]))]
                before, after = ep[:-1], ep[1:]
                same = np.ones(before.size, dtype=bool)
                for field, value in enumerate(key):
                    if not value:
                        same &= self._ns[field, rows[before]] == self._ns[field, rows[after]]
                before, after = before[same], after[same]
        prev = np.full(rows.size, -1, dtype=np.int64)
        prev[after] = before
        two = prev[before]
        has_two = two >= 0
        links = (before, after, two[has_two], after[has_two])
        if cache:
            if len(self._links_cache) >= 64:
                self._links_cache.clear()
            self._links_cache[key] = (self._version, links)
        return links


def with_context(scores: F32, links: Links, weights: tuple[float, float, float]) -> F32:
    """Blend each linked position's score with its neighbours' (see ``context_prev_weight``).

    ``(s + wp * s_prev + wn * s_next + wp2 * s_prev2) / (1 + wp + wn + wp2)``,
    where a position without such a neighbour leaves that term out of both
    sums, so memories that are not episodes keep their score.
    """
    before, after, before2, after2 = links
    out = scores.copy()
    den = np.ones(scores.size, dtype=np.float32)
    for w, src, dst in (
        (weights[0], before, after),
        (weights[1], after, before),
        (weights[2], before2, after2),
    ):
        if w:
            out[dst] += np.float32(w) * scores[src]
            den[dst] += np.float32(w)
    out /= den
    return out
