"""The bundled WordLlama model, loaded without holding the GIL for long.

Why this module exists: ``tokenizers.Tokenizer.from_file`` parses WordLlama's
1.8 MB tokenizer file in one call that holds the GIL for its whole run
(60-305 ms measured, issue 16), and ``get_vocab`` holds it again for
~20 ms; ``safetensors.numpy.load_file`` ~10 ms.  Every other thread of the
process -- an asyncio event loop included -- stops for that long once per
process, while the store warms up in the background.

So the model is read here in pieces: the tokenizer file line by line in
blocks (each block a millisecond or less of C work, with a short sleep between
blocks so a waiting thread gets the GIL), the weights by reading the
safetensors header and viewing the data (the read and the float16 -> float32
cast release the GIL).  Text is tokenised by :class:`LlamaBPE`, a Python
implementation of exactly what the ``tokenizers`` library does with this file
(the added-token split, the normaliser, byte-level BPE with byte fallback and
the same merge order, including how it revalidates queued merges), with a
cache of word pieces.  ``tests/models/test_wordllama_tokenizer.py`` checks the
token ids against the library on all the LoCoMo text and on Unicode and edge
cases, and the embeddings bit for bit.

Should a future ``wordllama`` wheel ship a tokenizer this implementation does
not cover (another model type, normaliser or pre-tokeniser), :func:`load`
falls back to the ``tokenizers`` library and logs it: correct, with the long
hold back.

The embedding arithmetic is the one WordLlama's inference uses (ids padded per
batch with 0, clipped to the table, rows gathered, mean over the attention
mask in float32), so vectors are bit-identical to ``WordLlamaInference.embed``
and stored embeddings stay valid.
"""

from __future__ import annotations

import heapq
import importlib.util
import json
import os
import re
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt
import structlog

from actormem import _pace
from actormem._pace import pace

__all__ = ["LlamaBPE", "LoadedModel", "UnsupportedTokenizer", "load"]

log = structlog.get_logger(__name__)

TOKENIZER_FILE: Final = "tokenizers/l2_supercat_tokenizer_config.json"
WEIGHTS_FILE: Final = "weights/l2_supercat_256.safetensors"
WEIGHTS_KEY: Final = "embedding.weight"

_SPACE: Final = "\u2581"
#: Where a normalised text may be cut without changing the BPE result: before
#: a "\u2581" that follows another character (checked at load: no merge joins a
#: symbol ending in another character to one starting with "\u2581").
_PIECE: Final = re.compile(f"{_SPACE}*[^{_SPACE}]+|{_SPACE}+")
#: Ids are < 2**15 in this vocabulary; a merge pair is keyed ``a << 15 | b``.
_SHIFT: Final = 15
_CACHE_MAX: Final = 200_000
#: Longer pieces (runs without spaces: base64, long URLs) are not cached.
_CACHE_PIECE: Final = 256
#: Lines parsed per block when reading the tokenizer file (one ``json.loads``
#: of 1,000 entries is well under a millisecond of C work holding the GIL).
_BLOCK_LINES: Final = 1_000
#: Merge lines turned into the merge table between two ``pace()`` calls (a
#: block of 2,000 was 2-4 ms of Python, 45 ms under load, in one stretch).
_MERGE_LINES: Final = 500
#: Token rows gathered at a time to sum a text's vectors: a 340k-character
#: text is 115k tokens, a 118 MB gather (1 s of page faults at load 5) in one
#: array; 4,096 rows are 4 MB, reused.
_GATHER_ROWS: Final = 4_096
#: Weights read and cast to float32 at a time (1 MB of float16).
_READ_VALUES: Final = 1 << 19


class UnsupportedTokenizer(Exception):
    """The tokenizer file is not one :class:`LlamaBPE` reproduces exactly."""


class Tokenizer(Protocol):
    """What the embedder needs from a tokenizer."""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (added tokens split out, normalised, BPE)."""
        ...

    def tokenize_word(self, sequence: str) -> list[int]:
        """Token ids of an already normalised ``sequence`` (the BPE model alone)."""
        ...

    def whole_words(self) -> dict[str, int]:
        """``word -> id`` for the vocabulary's whole-word tokens (``"\\u2581word"``)."""
        ...


# -- the tokenizer file ---------------------------------------------------------------------


def _read_blocks(path: Path, pace: Callable[[], None]) -> Iterator[list[str]]:
    with path.open(encoding="utf-8") as fh:
        while True:
            lines = fh.readlines(1 << 16)
            if not lines:
                return
            yield lines
            pace()


def _parse_section(lines: list[str], open_: str, close: str) -> Any:
    """Parse the body lines of a JSON object or array (one entry per line)."""
    body = "".join(lines).rstrip().rstrip(",")
    return json.loads(open_ + body + close)


def _read_tokenizer_file(
    path: Path, pace: Callable[[], None]
) -> tuple[dict[str, Any], dict[str, int], list[str]]:
    """``(config without vocab and merges, vocab, merges)`` read in small blocks.

    The file is pretty-printed JSON with one vocabulary entry and one merge per
    line; the two sections are parsed ``_BLOCK_LINES`` lines at a time, the rest
    of the file (a few kilobytes) in one piece.  A file laid out otherwise is
    parsed whole (correct, one longer hold).
    """
    skeleton: list[str] = []
    vocab: dict[str, int] = {}
    merges: list[str] = []
    section: str | None = None
    pending: list[str] = []

    def flush() -> None:
        if not pending:
            return
        if section == '"vocab": {':
            part = _parse_section(pending, "{", "}")
            if not isinstance(part, dict):
                raise UnsupportedTokenizer("vocab is not an object")
            vocab.update(part)
        else:
            part = _parse_section(pending, "[", "]")
            if not isinstance(part, list):
                raise UnsupportedTokenizer("merges is not an array")
            merges.extend(part)
        pending.clear()
        pace()

    for block in _read_blocks(path, pace):
        for line in block:
            stripped = line.strip()
            if section is None:
                if stripped in ('"vocab": {', '"merges": ['):
                    section = stripped
                else:
                    skeleton.append(line)
                continue
            if stripped in ("}", "},", "]", "],"):
                flush()
                skeleton.append(section + stripped + "\n")  # '"vocab": {},' and the like
                section = None
                continue
            pending.append(line)
            if len(pending) >= _BLOCK_LINES:
                flush()
    if section is not None:
        raise UnsupportedTokenizer("the tokenizer file ends inside a section")
    try:
        config = json.loads("".join(skeleton))
    except json.JSONDecodeError:
        # Not laid out one entry per line: parse the whole file at once.
        whole = json.loads(path.read_text(encoding="utf-8"))
        model = whole.get("model") or {}
        vocab, merges = dict(model.get("vocab") or {}), list(model.get("merges") or [])
        model.pop("vocab", None)
        model.pop("merges", None)
        return whole, vocab, merges
    model = config.get("model")
    if isinstance(model, dict) and not vocab and not merges:
        # Laid out otherwise (e.g. on one line): the sections were parsed whole.
        vocab = dict(model.pop("vocab", None) or {})
        merges = list(model.pop("merges", None) or [])
    return config, vocab, merges


_EXPECTED_NORMALIZER: Final = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": _SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE},
    ],
}


def _check_config(
    config: dict[str, Any],
    vocab: dict[str, int],
    merges: list[str],
    pace: Callable[[], None] = _pace.pace,
) -> None:
    """Refuse anything :class:`LlamaBPE` does not reproduce exactly."""
    model = config.get("model") or {}
    expected_model = {
        "type": "BPE",
        "dropout": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "byte_fallback": True,
    }
    for key, value in expected_model.items():
        if model.get(key) != value:
            raise UnsupportedTokenizer(f"model.{key} is {model.get(key)!r}, expected {value!r}")
    if model.get("ignore_merges", False):
        raise UnsupportedTokenizer("model.ignore_merges is set")
    if config.get("normalizer") != _EXPECTED_NORMALIZER:
        raise UnsupportedTokenizer("the normaliser is not Prepend + Replace of the space")
    if config.get("pre_tokenizer") is not None:
        raise UnsupportedTokenizer("the file has a pre-tokeniser")
    for added in config.get("added_tokens") or []:
        flags = ("single_word", "lstrip", "rstrip", "normalized")
        if any(added.get(f) for f in flags) or not added.get("special"):
            raise UnsupportedTokenizer(f"added token {added.get('content')!r} has options")
        if vocab.get(added.get("content")) != added.get("id"):
            raise UnsupportedTokenizer(f"added token {added.get('content')!r} is not in the vocab")
    if not vocab or max(vocab.values()) >= 1 << _SHIFT or min(vocab.values()) < 0:
        raise UnsupportedTokenizer("vocabulary ids out of range")
    if any(f"<0x{b:02X}>" not in vocab for b in range(256)):
        raise UnsupportedTokenizer("a byte-fallback token is missing (unknown tokens possible)")
    for start in range(0, len(merges), _MERGE_LINES * 4):  # ~10 ms in one piece
        block = merges[start : start + _MERGE_LINES * 4]
        if not all(isinstance(m, str) and m.count(" ") == 1 for m in block):
            raise UnsupportedTokenizer("merges are not 'left right' strings")
        pace()


# -- the tokenizer --------------------------------------------------------------------------


#: A normalised text longer than this is cut (at piece boundaries) before the
#: piece regex runs over it: one ``findall`` over a megabyte holds the GIL ~20 ms,
#: and a part is encoded between two ``pace()`` calls (32k characters were 3 ms).
_PART: Final = 1 << 13


def _parts(text: str) -> Iterator[str]:
    """``text`` in slices of about :data:`_PART` characters, cut where a piece starts."""
    start = 0
    while len(text) - start > _PART:
        cut = start + _PART
        # A piece starts at a "\u2581" that follows another character.
        while cut < len(text) and not (text[cut] == _SPACE and text[cut - 1] != _SPACE):
            cut = text.find(_SPACE, cut + 1)
            if cut < 0:
                cut = len(text)
        yield text[start:cut]
        pace()
        start = cut
    yield text[start:]


class LlamaBPE:
    """Byte-fallback BPE over a SentencePiece-style vocabulary, as ``tokenizers`` runs it.

    Thread-safe: the piece cache is a dict that only grows (and is cleared when
    full); two threads computing the same piece store the same value.
    """

    def __init__(
        self,
        vocab: dict[str, int],
        merges: dict[int, int],
        specials: Sequence[str],
    ) -> None:
        self._vocab = vocab
        self._merges = merges
        self._bytes = [vocab[f"<0x{b:02X}>"] for b in range(256)]
        self._specials = {s: vocab[s] for s in specials}
        # Leftmost-longest matching of the added tokens, as the library's trie does.
        ordered = sorted(self._specials, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self._cache: dict[str, tuple[int, ...]] = {}
        self._whole: dict[str, int] | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_file(cls, path: Path, pace: Callable[[], None] = _pace.pace) -> LlamaBPE:
        """Read ``path`` in small blocks (see the module docstring).

        Raises:
            UnsupportedTokenizer: The file uses options this class does not reproduce.
        """
        config, vocab, merge_lines = _read_tokenizer_file(path, pace)
        _check_config(config, vocab, merge_lines, pace)
        # pair key -> ``rank << _SHIFT | merged id``: one int, not a (rank, id)
        # tuple -- 61k tuples kept alive made ~87 young collections and, in
        # the warm-up beside an application's work, brought on a full one
        # (the process's ~70k objects: 20-27 ms with the GIL held).
        merges: dict[int, int] = {}
        shift = _SHIFT
        for start in range(0, len(merge_lines), _MERGE_LINES):
            # Tuples, not lists: the collector untracks tuples of strings, so a
            # block alive during a collection does not bring on a full one.
            pairs = [line.partition(" ")[::2] for line in merge_lines[start : start + _MERGE_LINES]]
            try:
                keys = [(vocab[a] << shift) | vocab[b] for a, b in pairs]
                values = [
                    (rank << shift) | vocab[a + b] for rank, (a, b) in enumerate(pairs, start)
                ]
            except KeyError as exc:
                raise UnsupportedTokenizer(f"a merge names {exc} not in the vocab") from exc
            if any(b[0] == _SPACE and a[-1] != _SPACE for a, b in pairs):
                raise UnsupportedTokenizer("a merge joins across a word start")
            merges.update(zip(keys, values, strict=True))  # a repeated pair: the last one wins
            pace()
        specials = [a["content"] for a in config.get("added_tokens") or []]
        return cls(vocab, merges, specials)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as ``Tokenizer.encode(text, add_special_tokens=False)``.

        Raises:
            UnicodeEncodeError: ``text`` holds a lone surrogate.
        """
        out: list[int] = []
        if self._special_re is None or "<" not in text:
            self._encode_segment(text, out)
            return out
        at = 0
        for match in self._special_re.finditer(text):
            self._encode_segment(text[at : match.start()], out)
            out.append(self._specials[match.group()])
            at = match.end()
        self._encode_segment(text[at:], out)
        return out

    def _encode_segment(self, segment: str, out: list[int]) -> None:
        if not segment:
            return
        normalised = _SPACE + segment.replace(" ", _SPACE)
        cache = self._cache
        for part in _parts(normalised):
            for piece in _PIECE.findall(part):
                ids = cache.get(piece)
                if ids is None:
                    ids = self._piece(piece)
                out.extend(ids)

    def tokenize_word(self, sequence: str) -> list[int]:
        """Ids of ``sequence`` through the BPE model alone (no normaliser, no added tokens)."""
        out: list[int] = []
        cache = self._cache
        for part in _parts(sequence):
            for piece in _PIECE.findall(part):
                ids = cache.get(piece)
                out.extend(ids if ids is not None else self._piece(piece))
        return out

    def whole_words(self) -> dict[str, int]:
        """``word -> id`` for the whole-word tokens (built once, in blocks)."""
        whole = self._whole
        if whole is None:
            with self._lock:
                if self._whole is None:
                    built: dict[str, int] = {}
                    for n, (token, i) in enumerate(self._vocab.items()):
                        if token.startswith(_SPACE) and len(token) > 1:
                            built[token[1:]] = i
                        if n % 2_000 == 0:
                            pace()
                    self._whole = built
                whole = self._whole
        return whole

    def _piece(self, piece: str) -> tuple[int, ...]:
        vocab = self._vocab
        symbols: list[int] = []
        for char in piece:
            i = vocab.get(char)
            if i is not None:
                symbols.append(i)
            else:
                byte_ids = self._bytes
                symbols.extend(byte_ids[b] for b in char.encode("utf-8"))
        ids = tuple(self._merge(symbols))
        if len(piece) <= _CACHE_PIECE:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[piece] = ids
        return ids

    def _merge(self, c: list[int]) -> list[int]:
        """Apply the merges lowest rank first (then leftmost), as the library does.

        A queued merge is applied when the pair now at its position still
        merges into the same token (the library's check), else skipped.
        """
        n = len(c)
        if n < 2:
            return c
        merges = self._merges
        shift = _SHIFT
        mask = (1 << shift) - 1
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        alive = [True] * n
        # (rank << shift | id, position): ordered by rank, then position (one
        # rank is one pair, so one id), as (rank, position, id) was.
        queue: list[tuple[int, int]] = []
        for i in range(n - 1):
            m = merges.get((c[i] << shift) | c[i + 1])
            if m is not None:
                queue.append((m, i))
        heapq.heapify(queue)
        pop, push = heapq.heappop, heapq.heappush
        steps = 0
        while queue:
            steps += 1
            if not steps & 1023:  # a long piece (no spaces) is a long loop
                pace()
            queued, pos = pop(queue)
            new_id = queued & mask
            if not alive[pos]:
                continue
            right = nxt[pos]
            if right == -1:
                continue
            m = merges.get((c[pos] << shift) | c[right])
            if m is None or m & mask != new_id:
                continue
            c[pos] = new_id
            alive[right] = False
            after = nxt[right]
            nxt[pos] = after
            if after != -1:
                prev[after] = pos
            before = prev[pos]
            if before >= 0:
                m = merges.get((c[before] << shift) | new_id)
                if m is not None:
                    push(queue, (m, before))
            if after != -1:
                m = merges.get((new_id << shift) | c[after])
                if m is not None:
                    push(queue, (m, pos))
        return [c[i] for i in range(n) if alive[i]]


class _LibraryTokenizer:
    """The ``tokenizers`` library, for a tokenizer file :class:`LlamaBPE` does not cover."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        self._tok = HFTokenizer.from_file(str(path))
        self._tok.no_padding()
        self._tok.no_truncation()
        self._whole: dict[str, int] | None = None

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def tokenize_word(self, sequence: str) -> list[int]:
        return [t.id for t in self._tok.model.tokenize(sequence)]

    def whole_words(self) -> dict[str, int]:
        if self._whole is None:
            vocab: dict[str, int] = self._tok.get_vocab()
            self._whole = {
                p[1:]: i for p, i in vocab.items() if p.startswith(_SPACE) and len(p) > 1
            }
        return self._whole


# -- the weights ----------------------------------------------------------------------------

_DTYPES: Final = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}


def read_matrix(path: Path, key: str) -> npt.NDArray[np.float32]:
    """Read tensor ``key`` of a safetensors file as C-contiguous float32.

    The format is an 8-byte little-endian header length, a JSON header
    (``dtype``, ``shape``, ``data_offsets`` per tensor) and the raw data.  The
    tensor is read and cast :data:`_READ_VALUES` values at a time into the
    result (``readinto`` and the cast release the GIL; ``pace()`` between
    blocks): one ``read()`` of the whole file grew its bytes object with the GIL
    held, and the whole-table cast ran in one piece (9-11 ms of the loop's
    late ticks in the store's warm-up).
    """
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        if size > 100 * 1024 * 1024:
            raise ValueError(f"{path.name}: a safetensors header of {size} bytes")
        header = json.loads(fh.read(size))
        entry = header.get(key)
        if not isinstance(entry, dict) or entry.get("dtype") not in _DTYPES:
            raise ValueError(f"{path.name}: no float tensor {key!r}")
        start, end = (int(x) for x in entry["data_offsets"])
        shape = tuple(int(s) for s in entry["shape"])
        dtype = np.dtype(_DTYPES[entry["dtype"]])
        count = int(np.prod(shape))
        data_len = os.fstat(fh.fileno()).st_size - 8 - size
        if end - start != dtype.itemsize * count or not 0 <= start <= end <= data_len:
            raise ValueError(f"{path.name}: tensor {key!r} does not fit its data")
        out = np.empty(count, dtype=np.float32)
        raw = np.empty(min(count, _READ_VALUES) * dtype.itemsize, dtype=np.uint8)
        fh.seek(8 + size + start)
        for lo in range(0, count, _READ_VALUES):
            pace()
            n = min(_READ_VALUES, count - lo)
            nbytes = n * dtype.itemsize
            if fh.readinto(raw.data[:nbytes]) != nbytes:
                raise ValueError(f"{path.name}: tensor {key!r} does not fit its data")
            np.copyto(out[lo : lo + n], raw[:nbytes].view(dtype), casting="unsafe")
    return out.reshape(shape)


# -- the model ------------------------------------------------------------------------------


class LoadedModel:
    """Token table and tokenizer; :meth:`embed` as WordLlama's inference computes it."""

    def __init__(self, embedding: npt.NDArray[np.float32], tokenizer: Tokenizer) -> None:
        self.embedding = embedding
        self.tokenizer = tokenizer

    def embed(self, texts: Sequence[str], batch_size: int) -> npt.NDArray[np.float32]:
        """Mean of the token vectors of each text (not normalised), float32."""
        table = self.embedding
        if len(texts) == 1:
            return self._embed_one(texts[0])
        out = np.empty((len(texts), table.shape[1]), dtype=np.float32)
        encode = self.tokenizer.encode
        top = table.shape[0] - 1
        for start in range(0, len(texts), batch_size):
            rows = []
            for text in texts[start : start + batch_size]:
                pace()
                rows.append(encode(text))
            # WordLlama pads the batch's ids with 0 to its longest text, gathers
            # (batch, width, dim) rows, sets the padding rows to row 0 times 0.0 and
            # sums along the text in float32: numpy's sum starts from +0.0 and adds
            # the rows in order, so a padding zero never changes a sum (+0.0 or a
            # signed zero added to a sum that is never -0.0) and each text's sum is
            # its own rows' sum -- computed here text by text, without the padded
            # array (100 texts of 4,000 characters: 133 MB).  Same bits.
            for r, row in enumerate(rows):
                if row:
                    ids = np.array(row, dtype=np.int32)
                    np.clip(ids, 0, top, out=ids)
                    out[start + r] = _sum_rows(table, ids) / np.float32(len(row))
                else:
                    out[start + r] = 0.0
                pace()
        return out

    def _embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """:meth:`embed` of one text: the batch path's numbers, bit for bit, in 4 numpy calls.

        A batch of one has no padding, so the mask, the padding fix-up and the
        count array are all no-ops; a single write paid ~50 us for them.
        """
        table = self.embedding
        tokens = self.tokenizer.encode(text)
        # The batch path's clip, on the list (``np.clip`` with Python bounds
        # looked the integer type's limits up twice a call: ~5 us of a write).
        top = table.shape[0] - 1
        if len(tokens) > _GATHER_ROWS:
            ids = _paced_ids(tokens, top)
        else:
            if tokens and (min(tokens) < 0 or max(tokens) > top):
                tokens = [0 if t < 0 else top if t > top else t for t in tokens]
            ids = np.array(tokens, dtype=np.int32)
        summed = _sum_rows(table, ids)
        out: npt.NDArray[np.float32] = (summed / np.float32(max(ids.size, 1)))[None, :]
        return out


def _paced_ids(tokens: list[int], top: int) -> npt.NDArray[np.int32]:
    """``tokens`` clipped to ``[0, top]`` as int32, converted :data:`_GATHER_ROWS` at a time.

    ``min``, ``max`` and ``np.array`` over the 115k tokens of an offloaded
    conversation are C loops that kept the GIL 5-7 ms; in blocks, with
    ``pace()`` between, and the clip done by numpy (same values).
    """
    wide = np.empty(len(tokens), dtype=np.int64)
    try:
        for start in range(0, len(tokens), _GATHER_ROWS):
            pace()
            block = tokens[start : start + _GATHER_ROWS]
            wide[start : start + len(block)] = block
    except OverflowError:  # an id past int64: clip in Python, as the short path does
        clipped = [0 if t < 0 else top if t > top else t for t in tokens]
        return np.array(clipped, dtype=np.int32)
    np.clip(wide, 0, top, out=wide)
    return wide.astype(np.int32)


def _sum_rows(
    table: npt.NDArray[np.float32], ids: npt.NDArray[np.int32]
) -> npt.NDArray[np.float32]:
    """``np.add.reduce(table[ids], axis=0, dtype=np.float32)`` bit for bit, in blocks.

    numpy adds the gathered rows in order from +0.0, so the sum of the first
    block followed by the next block's rows in order is the same sum; a block
    is gathered into one reused buffer (:data:`_GATHER_ROWS` rows) with the
    running sum as its first row, and the thread paces between blocks.
    """
    n = ids.size
    if n <= _GATHER_ROWS:
        summed: npt.NDArray[np.float32] = np.add.reduce(table[ids], axis=0, dtype=np.float32)
        return summed
    buf = np.empty((_GATHER_ROWS + 1, table.shape[1]), dtype=np.float32)
    np.take(table, ids[:_GATHER_ROWS], axis=0, out=buf[1:], mode="clip")
    summed = np.add.reduce(buf[1:], axis=0, dtype=np.float32)
    for start in range(_GATHER_ROWS, n, _GATHER_ROWS):
        pace()
        part = ids[start : start + _GATHER_ROWS]
        buf[0] = summed
        np.take(table, part, axis=0, out=buf[1 : part.size + 1], mode="clip")
        summed = np.add.reduce(buf[: part.size + 1], axis=0, dtype=np.float32)
    return summed


def package_dir() -> Path:
    """The installed ``wordllama`` package folder, found without importing it."""
    spec = importlib.util.find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the wordllama package is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def load(root: Path | None = None) -> LoadedModel:
    """Load the packaged model (tokenizer in blocks, weights by view and cast)."""
    root = root or package_dir()
    tok_path = root / TOKENIZER_FILE
    tokenizer: Tokenizer
    try:
        tokenizer = LlamaBPE.from_file(tok_path)
    except UnsupportedTokenizer as exc:
        log.info("wordllama.tokenizer_fallback", reason=str(exc))
        tokenizer = _LibraryTokenizer(tok_path)
    embedding = read_matrix(root / WEIGHTS_FILE, WEIGHTS_KEY)
    return LoadedModel(embedding, tokenizer)
