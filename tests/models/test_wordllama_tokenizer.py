"""The bundled model's own tokenizer gives the ``tokenizers`` library's ids and vectors.

``actormem.models._wordllama`` reads WordLlama's tokenizer file in small
blocks and tokenises in Python (the library held the GIL for its whole parse,
up to 305 ms).  These tests hold it to the library: the same token ids on all
the LoCoMo text, source code, generated Unicode and edge cases, and
bit-identical embeddings, so stored vectors and search results do not move.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from actormem.models import _wordllama, embedders
from actormem.models.embedders import WordLlamaEmbedder

tokenizers = pytest.importorskip("tokenizers")

LOCOMO = Path("/work/shared/data/locomo_dev.json")
ROOT = _wordllama.package_dir()


@pytest.fixture(scope="module")
def library() -> Any:
    return tokenizers.Tokenizer.from_file(str(ROOT / _wordllama.TOKENIZER_FILE))


@pytest.fixture(scope="module")
def ours() -> _wordllama.LlamaBPE:
    return _wordllama.LlamaBPE.from_file(ROOT / _wordllama.TOKENIZER_FILE)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _locomo() -> list[str]:
    if not LOCOMO.exists():
        return []
    return list(dict.fromkeys(_strings(json.loads(LOCOMO.read_text()))))


def _code() -> list[str]:
    # Python's own library: indentation runs, punctuation, tabs, non-ASCII comments.
    src = Path(json.__file__).parent.parent
    texts: list[str] = []
    for name in ("textwrap.py", "json/decoder.py", "unicodedata.py", "locale.py", "difflib.py"):
        path = src / name
        if path.exists():
            text = path.read_text(encoding="utf-8")
            texts += [text[i : i + 3000] for i in range(0, len(text), 3000)]
    return texts


_PIECES = [
    *"abcXYZ019 .,;:!?'\"-_<>/\\()[]{}@#$%^&*+=~`|\t\n\r\x00\x7f",
    "<s>", "</s>", "<unk>", "<s", "</", "unk>", "<<s>>", "\u2581", "\u2581\u2581",
    "é", "e\u0301", "ß", "ﬁ", "İ", "中文", "日本語", "한국어", "😀", "👍🏽", "👨‍👩‍👧",
    "\u200b", "\ufeff", "\U0010ffff", "ـ", "עברית", "العربية", "Ω", "\u2028", "\x85",
    "ing", "tion", " the", "  ", "   ", "hello", "Hello", "HELLO", "don't", "3.14",
]  # fmt: skip


def _generated(n: int) -> list[str]:
    rng = random.Random(16)
    out = []
    for _ in range(n):
        parts = [rng.choice(_PIECES) for _ in range(rng.randint(0, 30))]
        out.append(("" if rng.random() < 0.5 else " ").join(parts))
        if rng.random() < 0.1:  # any code point outside the surrogates
            chars = (rng.randint(1, 0x2FFFF) for _ in range(rng.randint(1, 20)))
            out.append("".join(chr(c) for c in chars if not 0xD800 <= c <= 0xDFFF))
    return out


EDGES = [
    "", " ", "  ", "\n", "\t", "<s>", "<s><s>", " <s> ", "a<s>b", "</s>x", "a</s><unk>b", "a<unk",
    "x" * 5000, "ab" * 3000, " " * 100, "\n" * 50, "😀" * 200, "a" + "\u0301" * 100,
    "hello  world ", "trailing   ", "   leading", "mixed \t tabs\nand lines",
]  # fmt: skip


def _assert_same_ids(ours: _wordllama.LlamaBPE, library: Any, texts: list[str]) -> None:
    expected = [e.ids for e in library.encode_batch(texts, add_special_tokens=False)]
    for text, ids in zip(texts, expected, strict=True):
        assert ours.encode(text) == ids, repr(text[:80])


def test_the_same_ids_as_the_library_on_locomo(ours: _wordllama.LlamaBPE, library: Any) -> None:
    texts = _locomo()
    if not texts:
        pytest.skip(f"{LOCOMO} is not here")
    assert len(texts) > 5_000
    _assert_same_ids(ours, library, texts)


def test_the_same_ids_on_code_unicode_and_edge_cases(
    ours: _wordllama.LlamaBPE, library: Any
) -> None:
    _assert_same_ids(ours, library, EDGES + _code() + _generated(20_000))
    # Again, now from the piece cache.
    _assert_same_ids(ours, library, EDGES + _generated(2_000))


def test_long_texts_cut_into_parts_give_the_same_ids(
    ours: _wordllama.LlamaBPE, library: Any
) -> None:
    # Texts past _PART characters are cut at piece starts before the regex runs.
    prose = " ".join(_locomo()[:4_000] or _code())
    runs = "word" + "   ".join(f"x{i}" for i in range(20_000))  # space runs at every cut
    solid = "ab" * 40_000 + " tail"  # one piece longer than a part
    texts = [prose[:200_000], runs, solid, "  " * 40_000, "z " + "\u2581" * 70_000 + "y"]
    assert all(len(t) > _wordllama._PART for t in texts)
    _assert_same_ids(ours, library, texts)


def test_the_bpe_model_alone_matches_for_word_vectors(
    ours: _wordllama.LlamaBPE, library: Any
) -> None:
    words = ["hello", "Hello", "", "naïve", "x\u2581y", "\u2581", "123456", "pneumonoultra"]
    words += [w for w in _generated(500) if " " not in w]
    for word in words:
        seq = "\u2581" + word
        assert ours.tokenize_word(seq) == [t.id for t in library.model.tokenize(seq)], word
    vocab = library.get_vocab()
    expected = {p[1:]: i for p, i in vocab.items() if p.startswith("\u2581") and len(p) > 1}
    assert ours.whole_words() == expected


def test_embeddings_are_bit_identical_to_wordllama_inference(library: Any) -> None:
    from safetensors.numpy import load_file

    from actormem.logs import keep_root_logging

    with keep_root_logging():
        from wordllama.inference import WordLlamaInference

    weights = load_file(str(ROOT / _wordllama.WEIGHTS_FILE))[_wordllama.WEIGHTS_KEY]
    reference = WordLlamaInference(np.asarray(weights, dtype=np.float32), library)
    model = _wordllama.load()
    np.testing.assert_array_equal(model.embedding, reference.embedding)
    texts = (_locomo()[:3_000] or _code()) + EDGES + _generated(500)
    for batch_size in (256, 7):
        want = reference.embed(texts, norm=False, return_np=True, batch_size=batch_size)
        got = model.embed(texts, batch_size)
        assert got.dtype == np.float32
        assert got.tobytes() == want.tobytes()


def test_long_texts_are_summed_in_blocks_to_the_same_bits(library: Any) -> None:
    # Texts past _GATHER_ROWS tokens are summed block by block into one reused
    # buffer (a 340k-character text was a 118 MB gather); texts in a batch one
    # by one instead of a padded (batch, width, 256) array.  Same bits as
    # WordLlama's padded batch and as one gather.
    from safetensors.numpy import load_file

    from actormem.logs import keep_root_logging

    with keep_root_logging():
        from wordllama.inference import WordLlamaInference

    weights = load_file(str(ROOT / _wordllama.WEIGHTS_FILE))[_wordllama.WEIGHTS_KEY]
    reference = WordLlamaInference(np.asarray(weights, dtype=np.float32), library)
    model = _wordllama.load()
    rng = random.Random(16)
    words = [w for t in (_locomo()[:200] or _code()) for w in t.split()] or ["word"]
    texts = [
        " ".join(rng.choice(words) for _ in range(n))
        for n in (_wordllama._GATHER_ROWS * 3 + 17, 5, _wordllama._GATHER_ROWS + 1, 0)
    ]
    assert len(library.encode(texts[0], add_special_tokens=False).ids) > 3 * _wordllama._GATHER_ROWS
    want = reference.embed(texts, norm=False, return_np=True, batch_size=4)
    assert model.embed(texts, 4).tobytes() == want.tobytes()
    for text, row in zip(texts, want, strict=True):
        assert model.embed([text], 4).tobytes() == row[None, :].tobytes()
    ids = np.array(model.tokenizer.encode(texts[0]), dtype=np.int32)
    one_gather = np.add.reduce(model.embedding[ids], axis=0, dtype=np.float32)
    assert _wordllama._sum_rows(model.embedding, ids).tobytes() == one_gather.tobytes()


def test_a_tokenizer_file_it_does_not_cover_falls_back_to_the_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = json.loads((ROOT / _wordllama.TOKENIZER_FILE).read_text(encoding="utf-8"))
    config["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581"}
    with pytest.raises(_wordllama.UnsupportedTokenizer, match="pre-tokeniser"):
        _wordllama._check_config(config, config["model"]["vocab"], config["model"]["merges"])

    # The packaged file, with the check refusing it: the library reads it.
    def refuse(*_: object) -> None:
        raise _wordllama.UnsupportedTokenizer("refused by the test")

    monkeypatch.setattr(_wordllama, "_check_config", refuse)
    fallback = _wordllama.load()
    monkeypatch.undo()
    assert not isinstance(fallback.tokenizer, _wordllama.LlamaBPE)
    texts = EDGES + _generated(300)
    np.testing.assert_array_equal(fallback.embed(texts, 64), _wordllama.load().embed(texts, 64))


def test_a_file_laid_out_on_one_line_is_read_whole(tmp_path: Path) -> None:
    config = json.loads((ROOT / _wordllama.TOKENIZER_FILE).read_text(encoding="utf-8"))
    path = tmp_path / "tok.json"
    path.write_text(json.dumps(config), encoding="utf-8")  # no newlines at all
    compact = _wordllama.LlamaBPE.from_file(path)
    pretty = _wordllama.LlamaBPE.from_file(ROOT / _wordllama.TOKENIZER_FILE)
    texts = EDGES + _generated(300)
    assert [compact.encode(t) for t in texts] == [pretty.encode(t) for t in texts]


def test_a_damaged_weights_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    data = (ROOT / _wordllama.WEIGHTS_FILE).read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut short
    with pytest.raises(ValueError, match="does not fit its data"):
        _wordllama.read_matrix(path, _wordllama.WEIGHTS_KEY)
    with pytest.raises(ValueError, match="no float tensor 'nope'"):
        _wordllama.read_matrix(ROOT / _wordllama.WEIGHTS_FILE, "nope")


def test_a_lone_surrogate_is_refused_naming_the_text() -> None:
    with pytest.raises(TypeError, match="text 1 is not valid Unicode"):
        WordLlamaEmbedder().embed(["fine", "bad \ud800 text"])


def test_loading_imports_neither_wordllama_nor_tokenizers() -> None:
    # wordllama's import configures the root logger and takes ~140 ms; the
    # library tokenizer is the long GIL hold this module replaces.
    import subprocess

    code = (
        "import sys; from actormem.models import embedders;"
        "embedders.WordLlamaEmbedder().embed(['hello world']);"
        "print(sorted(m for m in ('wordllama', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert embedders._load_wordllama() is embedders._load_wordllama()
