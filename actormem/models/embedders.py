"""Embedders: texts in, an ``(n, dim)`` L2-normalised float32 matrix out.

Three implementations of :class:`actormem.models.base.Embedder`:

* :class:`WordLlamaEmbedder` -- the default.  A 256-d static embedding model
  that ships inside the ``wordllama`` wheel, built from the packaged
  tokenizer and weights (``WordLlama.load()`` would look in the wrong folder
  and then try the network).  The model loads lazily, once per process, and is
  shared by every instance; :mod:`actormem.models._wordllama` reads it in
  small pieces and tokenises in Python with the ``tokenizers`` library's exact
  ids (the library's parse held the GIL for up to 305 ms).
* :class:`OpenAIEmbedder` -- any OpenAI-compatible ``/embeddings`` endpoint
  over HTTP, with a timeout and retries on 429 / 5xx.  The API key is sent in
  the ``Authorization`` header and never logged.
* :class:`HashEmbedder` -- a tiny deterministic embedder (hashed word and
  character-trigram features).  No model, no network; meant for tests and
  quick experiments, not for quality.

Every embedder returns rows that are finite and L2-normalised (zero rows, e.g.
for an empty text, stay zero).  :func:`normalise_rows` and
:func:`check_embeddings` are shared helpers for implementations and callers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import structlog

from actormem.models import _wordllama
from actormem.models._wordllama import LoadedModel
from actormem.models.base import ModelError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "HashEmbedder",
    "OpenAIEmbedder",
    "WordLlamaEmbedder",
    "check_embeddings",
    "checked_unit_rows",
    "default_embedder",
    "normalise_rows",
    "unit_rows",
]

log = structlog.get_logger(__name__)

FloatMatrix = npt.NDArray[np.float32]


def normalise_rows(matrix: npt.ArrayLike) -> FloatMatrix:
    """Return ``matrix`` as C-contiguous float32 with unit-length rows.

    Rows whose norm is zero stay zero (an empty text has no direction).

    Args:
        matrix: A 2-D array-like of numbers.

    Returns:
        A new float32 array of the same shape.
    """
    arr = np.array(matrix, dtype=np.float32, copy=True, order="C")
    if arr.ndim != 2:
        raise ModelError(f"embeddings must be a 2-D matrix, got shape {arr.shape}")
    norms = row_norms(arr)
    np.divide(arr, norms, out=arr, where=norms > 0)
    return arr


def row_norms(arr: FloatMatrix) -> FloatMatrix:
    """``np.linalg.norm(arr, axis=1, keepdims=True)`` of a real matrix, the same numbers.

    What numpy's ``norm`` computes for that case, without its argument
    handling (a few microseconds, paid by every single write and query).
    """
    out: FloatMatrix = np.sqrt(np.add.reduce(arr * arr, axis=1, keepdims=True))
    return out


def unit_rows(arr: FloatMatrix) -> int | None:
    """Scale the rows of ``arr`` (2-D float32) to unit length in place, if all are finite.

    The same numbers as :func:`normalise_rows` (zero rows stay zero).  The
    finiteness check rides on the norms: a NaN or an infinity in a row makes
    its norm one too, so the values are looked at only when a norm is not
    finite (a NaN, or a finite row too large to square).  A single row (a
    write's, a query's) is divided without the zero-norm mask: two numpy
    passes fewer on every single embedding.

    Returns:
        None, or the first row holding NaN or an infinity (then ``arr`` is
        left as it was).
    """
    norms = row_norms(arr)
    if arr.shape[0] == 1:
        norm = float(norms[0, 0])
        if not math.isfinite(norm) and not np.isfinite(arr).all():
            return 0
        if norm > 0:
            np.divide(arr, norms, out=arr)
        return None
    if not np.isfinite(norms).all():
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            return int(np.flatnonzero(~finite)[0])
    np.divide(arr, norms, out=arr, where=norms > 0)
    return None


def _checked(matrix: object, n: int, dim: int, source: str) -> FloatMatrix:
    """``matrix`` as float32 C-contiguous after the type, shape and dtype checks."""
    if not isinstance(matrix, np.ndarray):
        raise ModelError(f"{source} returned {type(matrix).__name__}, expected a numpy array")
    if matrix.shape != (n, dim):
        raise ModelError(f"{source} returned shape {matrix.shape}, expected ({n}, {dim})")
    if matrix.dtype != np.float32 and not np.issubdtype(matrix.dtype, np.number):
        raise ModelError(f"{source} returned dtype {matrix.dtype}, expected float32")
    return np.ascontiguousarray(matrix, dtype=np.float32)


def checked_unit_rows(matrix: object, n: int, dim: int, *, source: str = "embedder") -> FloatMatrix:
    """:func:`normalise_rows` of :func:`check_embeddings` (a new array), checked once.

    Raises:
        ModelError: as :func:`check_embeddings`.
    """
    arr = np.array(_checked(matrix, n, dim, source), dtype=np.float32, copy=True, order="C")
    bad = unit_rows(arr)
    if bad is not None:
        raise ModelError(f"{source} returned NaN or infinite values (first in row {bad})")
    return arr


def check_embeddings(matrix: object, n: int, dim: int, *, source: str = "embedder") -> FloatMatrix:
    """Validate what an embedder returned and return it as float32.

    Args:
        matrix: The value returned by ``Embedder.embed``.
        n: The number of texts that were embedded.
        dim: The dimension the caller expects.
        source: A name for the embedder, used in error messages.

    Returns:
        ``matrix`` as a C-contiguous float32 ``(n, dim)`` array.

    Raises:
        ModelError: The value is not an ``(n, dim)`` numeric matrix, or holds
            NaN or infinite values.
    """
    arr = _checked(matrix, n, dim, source)
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise ModelError(f"{source} returned NaN or infinite values (first in row {bad})")
    return arr


# -- WordLlama -------------------------------------------------------------------


_WL_LOCK = threading.Lock()
_WL_MODEL: LoadedModel | None = None


def _load_wordllama() -> LoadedModel:
    """Build the packaged WordLlama model once per process (thread-safe).

    Read by :mod:`actormem.models._wordllama` in small pieces, so loading it in
    a background thread does not stop the process's other threads (the
    ``tokenizers`` library held the GIL for its whole parse).
    """
    global _WL_MODEL
    with _WL_LOCK:
        if _WL_MODEL is not None:
            return _WL_MODEL
        started = time.perf_counter()
        try:
            model = _wordllama.load()
        except Exception as exc:  # missing package or files, bad weights
            raise ModelError(f"could not load the bundled WordLlama model: {exc}") from exc
        _WL_MODEL = model
        log.debug(
            "wordllama.loaded",
            dim=int(model.embedding.shape[1]),
            ms=round((time.perf_counter() - started) * 1000, 1),
        )
        return model


class WordLlamaEmbedder:
    """The bundled 256-d WordLlama embedder (offline, no configuration).

    The model is built lazily on the first :meth:`embed` call and shared by all
    instances in the process.

    Attributes:
        name: ``"wordllama-l2-supercat-256"``; stored in the store's metadata to
            detect an embedder change.
        dim: 256.
    """

    name: str = "wordllama-l2-supercat-256"
    dim: int = 256
    #: A store opened with this embedder loads it in the background at open.
    warm_on_open: bool = True

    def __init__(self, *, batch_size: int = 256) -> None:
        """Create the embedder (loading happens on first use).

        Args:
            batch_size: Texts per inference batch inside WordLlama.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts`` into an ``(len(texts), 256)`` float32 matrix.

        Args:
            texts: The texts; each must be a ``str``.

        Returns:
            L2-normalised rows, one per text.

        Raises:
            TypeError: An item is not a string.
            ModelError: The model could not be loaded or returned bad values.
        """
        items = _check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _load_wordllama()
        try:
            raw = model.embed(items, self._batch_size)
        except UnicodeEncodeError as exc:
            bad = next(i for i, t in enumerate(items) if _has_surrogate(t))
            raise TypeError(f"text {bad} is not valid Unicode (a lone surrogate)") from exc
        return checked_unit_rows(raw, len(items), self.dim, source=self.name)

    def word_vectors(self, words: Sequence[str]) -> FloatMatrix:
        """One vector per word: the mean of its tokens' vectors, L2-normalised.

        The same pooling as :meth:`embed`, applied to a single word, without
        the padding and batching machinery (the tokenizer's BPE model is called
        directly: a word is ``"\\u2581" + word`` after the tokenizer's normalizer,
        and there is no pre-tokenizer); a word that is one token of the
        vocabulary is looked up without the tokenizer.  A few microseconds per
        word the tokenizer has not seen, well under one for the others.

        Args:
            words: Words without spaces (any case; callers pass casefolded ones).

        Returns:
            ``(len(words), 256)`` float32 rows (zero for an empty word).
        """
        items = _check_texts(words)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _load_wordllama()
        whole = model.tokenizer.whole_words()
        tokenize = model.tokenizer.tokenize_word
        ids: list[int] = []
        starts: list[int] = []
        for word in items:
            starts.append(len(ids))
            one = whole.get(word)
            if one is not None:
                ids.append(one)
            elif word:
                ids.extend(tokenize("\u2581" + word.replace(" ", "\u2581")))
        table = model.embedding
        counts = np.diff(np.asarray([*starts, len(ids)], dtype=np.int64))
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if ids:
            rows = table[np.clip(np.asarray(ids, dtype=np.int64), 0, table.shape[0] - 1)]
            nonempty = counts > 0
            sums = np.add.reduceat(rows, np.asarray(starts, dtype=np.int64)[nonempty], axis=0)
            out[nonempty] = sums / counts[nonempty, None]
        return normalise_rows(out)

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder(name={self.name!r}, dim={self.dim})"


# -- Hash embedder (tests) ----------------------------------------------------------

_WORD_RE = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """A deterministic embedder from hashed word and trigram features.

    Texts that share words get similar vectors, which is enough for tests of
    search plumbing; it does not understand meaning.  Fast and dependency-free.

    Attributes:
        name: ``"hash-<dim>"``.
        dim: The vector size.
        isotropic: True: hashed features spread its vectors evenly over every
            dimension, so a store keeps its vector searches exact (no
            projected first pass loses neighbours: recall@10 0.92-0.95 at
            20k-100k LoCoMo memories with one).
    """

    isotropic = True

    def __init__(self, dim: int = 64) -> None:
        """Create the embedder.

        Args:
            dim: Vector size (>= 8).
        """
        if dim < 8:
            raise ValueError("dim must be >= 8")
        self.dim = dim
        self.name = f"hash-{dim}"

    def _features(self, text: str) -> list[tuple[int, float]]:
        """(bucket, signed weight) pairs for the words and trigrams of ``text``."""
        feats: list[tuple[int, float]] = []
        for word in _WORD_RE.findall(text.casefold()):
            feats.append(self._bucket("w:" + word, 1.0))
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                feats.append(self._bucket("t:" + padded[i : i + 3], 0.3))
        return feats

    def _bucket(self, token: str, weight: float) -> tuple[int, float]:
        value = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
        return value % self.dim, weight if (value >> 40) & 1 else -weight

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts`` (see class docstring).

        Raises:
            TypeError: An item is not a string.
        """
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            for bucket, weight in self._features(text):
                out[row, bucket] += weight
        return normalise_rows(out)

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"


# -- OpenAI-compatible HTTP ------------------------------------------------------------


class OpenAIEmbedder:
    """An OpenAI-compatible embeddings endpoint (``POST {base_url}/embeddings``).

    Retries on connection errors, timeouts, HTTP 429 and 5xx with exponential
    backoff (honouring ``Retry-After`` when the server sends it), then raises
    :class:`ModelError`.  Other 4xx answers fail at once.  Each request,
    reading its reply included, is bounded by ``timeout`` and its reply by
    ``max_reply_bytes``; redirects are followed only within the same origin
    (see :mod:`actormem.models._http`).  The API key is never logged and
    never appears in ``repr``.

    Attributes:
        name: ``"openai:<model>"``; stored in the store's metadata.
        dim: The vector size the server returns for ``model``.
    """

    def __init__(
        self,
        *,
        model: str,
        dim: int,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        batch_size: int = 256,
        send_dimensions: bool = False,
        client: httpx.Client | None = None,
        total_timeout: float | None = None,
        max_reply_bytes: int | None = None,
    ) -> None:
        """Configure the adapter.

        Args:
            model: The model name sent in each request.
            dim: The expected vector size; answers of another size are an error.
            base_url: The API root, e.g. ``http://127.0.0.1:8000/v1``.
            api_key: Sent as ``Authorization: Bearer <key>`` when given.
            timeout: Seconds per HTTP request, reading the reply included.
            max_retries: Extra attempts after the first on retryable failures.
            backoff: Base delay in seconds; doubles with each retry.
            batch_size: Texts per request.
            send_dimensions: Also send ``"dimensions": dim`` (for models that
                can shorten their vectors).
            client: An ``httpx.Client`` to use instead of creating one.
            total_timeout: Seconds for one batch's request with all its
                retries and waits (``None``: only ``timeout`` per request).
            max_reply_bytes: The largest reply read (``None``: 32 MiB, as
                for the chat model); a larger one is a :class:`ModelError`
                (error replies: a 4 KiB preview).
        """
        if not model:
            raise ValueError("model must be a non-empty string")
        if dim < 1:
            raise ValueError("dim must be >= 1")
        if batch_size < 1 or max_retries < 0 or timeout <= 0:
            raise ValueError("batch_size >= 1, max_retries >= 0 and timeout > 0 are required")
        # Imported here: the store imports this module, and needs neither.
        from actormem._settings import DEFAULT_MAX_REPLY_BYTES, OPENAI_ARGS

        if max_reply_bytes is None:
            max_reply_bytes = DEFAULT_MAX_REPLY_BYTES
        OPENAI_ARGS["timeout"].check(timeout, "timeout")
        OPENAI_ARGS["total_timeout"].check(total_timeout, "total_timeout")
        OPENAI_ARGS["max_reply_bytes"].check(max_reply_bytes, "max_reply_bytes")
        import httpx

        self.name = f"openai:{model}"
        self.dim = dim
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        self._timeout = float(timeout)
        self._total_timeout = total_timeout
        self._max_reply_bytes = max_reply_bytes
        self._max_retries = max_retries
        self._backoff = backoff
        self._batch_size = batch_size
        self._send_dimensions = send_dimensions
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers = headers
        self._owns_client = client is None
        self._client = client if client is not None else httpx.Client(timeout=timeout)

    def close(self) -> None:
        """Close the HTTP client (if this adapter created it)."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self._model!r}, dim={self.dim}, url={self._url!r})"

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts`` with the remote model, ``batch_size`` texts per request.

        Raises:
            TypeError: An item is not a string.
            ModelError: The server failed after retries, or answered with
                malformed, wrong-sized or non-finite vectors.
        """
        items = _check_texts(texts)
        parts = [
            self._embed_batch(items[i : i + self._batch_size])
            for i in range(0, len(items), self._batch_size)
        ]
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalise_rows(np.concatenate(parts, axis=0))

    def _embed_batch(self, batch: list[str]) -> FloatMatrix:
        from actormem.models._http import HttpFailure

        payload: dict[str, Any] = {"model": self._model, "input": batch}
        if self._send_dimensions:
            payload["dimensions"] = self.dim
        content = json.dumps(payload).encode()  # ASCII: a lone surrogate is escaped, not fatal
        limit = self._total_timeout
        deadline = None if limit is None else time.monotonic() + limit
        attempt = 0
        while True:
            delay = self._backoff * (2**attempt)
            op = (
                self._timeout
                if deadline is None
                else min(self._timeout, deadline - time.monotonic())
            )
            if op <= 0:
                raise ModelError(
                    f"embeddings request to {self._url} timed out: no reply within "
                    f"total_timeout={limit:g}s ({attempt} attempt(s))",
                    problem="timed out",
                    endpoint=self._url,
                )
            try:
                status, body, retry_after = self._exchange(content, op)
            except HttpFailure as exc:
                if not exc.retryable:
                    raise ModelError(
                        f"embeddings request to {self._url} failed: {exc.detail}",
                        problem=exc.kind.replace("_", " "),
                        endpoint=self._url,
                    ) from None
                reason = exc.detail
            else:
                if 200 <= status < 300:
                    return self._parse(body, len(batch))
                if status != 429 and status < 500:
                    raise ModelError(
                        f"embeddings request to {self._url} failed with HTTP "
                        f"{status}: {body[:200].decode('utf-8', 'replace')}",
                        problem="HTTP error status",
                        status=status,
                        endpoint=self._url,
                    )
                reason = f"HTTP {status}"
                if retry_after is not None:
                    with contextlib.suppress(ValueError):
                        delay = max(delay, min(float(retry_after), 30.0))
            out_of_time = deadline is not None and time.monotonic() + delay >= deadline
            if attempt >= self._max_retries or out_of_time:
                raise ModelError(
                    f"embeddings request to {self._url} failed after "
                    f"{attempt + 1} attempts: {reason}",
                    problem="request failed",
                    endpoint=self._url,
                )
            log.warning(
                "embedder.retry", url=self._url, attempt=attempt + 1, reason=reason, delay=delay
            )
            time.sleep(delay)
            attempt += 1

    def _exchange(self, content: bytes, op: float) -> tuple[int, bytes, str | None]:
        """One request: its status, (capped) body and ``Retry-After``, all within ``op`` s."""
        from actormem.models._http import open_exchange

        exchange = open_exchange(
            self._client,
            self._url,
            content=content,
            headers=self._headers,
            deadline=time.monotonic() + op,
            limit=op,
            op_timeout=op,
            max_bytes=self._max_reply_bytes,
        )
        try:
            body = exchange.read()
        finally:
            exchange.close()
        response = exchange.response
        return response.status_code, body, response.headers.get("Retry-After")

    def _parse(self, raw: bytes, n: int) -> FloatMatrix:
        try:
            body = json.loads(raw)  # not msgspec: a NaN must reach check_embeddings
            data = sorted(body["data"], key=lambda item: int(item.get("index", 0)))
            rows = [item["embedding"] for item in data]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(
                f"malformed embeddings response from {self._url}: {exc}",
                problem="malformed reply",
                endpoint=self._url,
            ) from None
        except RecursionError:
            raise ModelError(
                f"malformed embeddings response from {self._url}: JSON nested too deeply",
                problem="malformed reply",
                endpoint=self._url,
            ) from None
        if len(rows) != n:
            raise ModelError(f"{self._url} returned {len(rows)} embeddings for {n} texts")
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (ValueError, TypeError) as exc:
            raise ModelError(f"non-numeric embeddings from {self._url}: {exc}") from exc
        return check_embeddings(matrix, n, self.dim, source=self.name)


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of strings, not a single string")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is {type(text).__name__}, expected str")
    return items


def default_embedder() -> WordLlamaEmbedder:
    """Return the default embedder (the bundled WordLlama model)."""
    return WordLlamaEmbedder()
