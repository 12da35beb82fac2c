"""Embedders: the bundled WordLlama model, the hash embedder, the OpenAI adapter."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from structlog.testing import capture_logs

from actormem.models.base import Embedder, ModelError
from actormem.models.embedders import (
    HashEmbedder,
    OpenAIEmbedder,
    WordLlamaEmbedder,
    check_embeddings,
    checked_unit_rows,
    normalise_rows,
    unit_rows,
)

Responder = Callable[[dict[str, Any], dict[str, str]], tuple[int, Any, dict[str, str]]]


class _Server:
    """A real HTTP server on 127.0.0.1 whose answers the test scripts."""

    def __init__(self, responder: Responder) -> None:
        self.requests: list[tuple[dict[str, Any], dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append((body, headers))
                if self.path != "/v1/embeddings":
                    status, payload, extra = 404, {"error": "not found"}, {}
                else:
                    status, payload, extra = responder(body, headers)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _vectors(texts: list[str], dim: int) -> list[list[float]]:
    return [[float(len(t) + i) for i in range(dim)] for t in texts]


def _ok(dim: int = 4) -> Responder:
    def respond(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        texts = body["input"]
        data = [
            {"object": "embedding", "index": i, "embedding": v}
            for i, v in enumerate(_vectors(texts, dim))
        ]
        data.reverse()  # servers may answer out of order; the index field decides
        return 200, {"object": "list", "data": data, "model": body["model"]}, {}

    return respond


@pytest.fixture
def serve() -> Iterator[Callable[[Responder], _Server]]:
    servers: list[_Server] = []

    def start(responder: Responder) -> _Server:
        server = _Server(responder)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


# -- OpenAI-compatible adapter --------------------------------------------------------


def test_openai_embedder_posts_and_normalises(serve: Callable[[Responder], _Server]) -> None:
    server = serve(_ok(4))
    with OpenAIEmbedder(
        model="text-embed-test", dim=4, base_url=server.base_url, api_key="sk-secret-123"
    ) as emb:
        assert isinstance(emb, Embedder)
        out = emb.embed(["a", "bbb"])
    assert out.dtype == np.float32 and out.shape == (2, 4)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    expected = normalise_rows(np.asarray(_vectors(["a", "bbb"], 4)))
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    body, headers = server.requests[0]
    assert body == {"model": "text-embed-test", "input": ["a", "bbb"]}
    assert headers["authorization"] == "Bearer sk-secret-123"
    assert "sk-secret-123" not in repr(emb)


def test_openai_embedder_batches(serve: Callable[[Responder], _Server]) -> None:
    server = serve(_ok(3))
    with OpenAIEmbedder(model="m", dim=3, base_url=server.base_url, batch_size=2) as emb:
        out = emb.embed(["a", "b", "c", "d", "e"])
        assert emb.embed([]).shape == (0, 3)
    assert out.shape == (5, 3)
    assert [len(b["input"]) for b, _ in server.requests] == [2, 2, 1]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_openai_embedder_retries_then_succeeds(
    serve: Callable[[Responder], _Server], status: int
) -> None:
    calls = {"n": 0}
    ok = _ok(2)

    def flaky(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
        calls["n"] += 1
        if calls["n"] <= 2:
            return status, {"error": "busy"}, {"Retry-After": "0"}
        return ok(body, headers)

    server = serve(flaky)
    with (
        capture_logs() as logs,
        OpenAIEmbedder(
            model="m", dim=2, base_url=server.base_url, api_key="sk-hidden", backoff=0.01
        ) as emb,
    ):
        assert emb.embed(["x"]).shape == (1, 2)
    assert calls["n"] == 3
    retries = [e for e in logs if e["event"] == "embedder.retry"]
    assert len(retries) == 2
    assert "sk-hidden" not in repr(logs)


def test_openai_embedder_gives_up_after_retries(serve: Callable[[Responder], _Server]) -> None:
    server = serve(lambda b, h: (500, {"error": "down"}, {}))
    with (
        OpenAIEmbedder(
            model="m", dim=2, base_url=server.base_url, max_retries=2, backoff=0.0
        ) as emb,
        pytest.raises(ModelError, match="after 3 attempts"),
    ):
        emb.embed(["x"])
    assert len(server.requests) == 3


def test_openai_embedder_client_error_is_not_retried(
    serve: Callable[[Responder], _Server],
) -> None:
    server = serve(lambda b, h: (401, {"error": "bad key"}, {}))
    with (
        OpenAIEmbedder(model="m", dim=2, base_url=server.base_url, backoff=0.0) as emb,
        pytest.raises(ModelError, match="HTTP 401"),
    ):
        emb.embed(["x"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"data": [{"index": 0, "embedding": [1.0, 2.0, 3.0]}]}, "shape"),
        ({"data": []}, "0 embeddings for 1"),
        ({"nope": 1}, "malformed"),
        ({"data": [{"index": 0, "embedding": ["a", "b"]}]}, "non-numeric"),
        (b"not json at all", "malformed"),
    ],
)
def test_openai_embedder_rejects_bad_answers(
    serve: Callable[[Responder], _Server], payload: Any, match: str
) -> None:
    server = serve(lambda b, h: (200, payload, {}))
    with (
        OpenAIEmbedder(model="m", dim=2, base_url=server.base_url, backoff=0.0) as emb,
        pytest.raises(ModelError, match=match),
    ):
        emb.embed(["x"])


def test_openai_embedder_rejects_nan(serve: Callable[[Responder], _Server]) -> None:
    payload = b'{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}'
    server = serve(lambda b, h: (200, payload, {}))
    with (
        OpenAIEmbedder(model="m", dim=2, base_url=server.base_url) as emb,
        pytest.raises(ModelError, match="NaN"),
    ):
        emb.embed(["x"])


def test_openai_embedder_timeout_is_retried_then_fails() -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)  # accepts connections but never answers
    port = sock.getsockname()[1]
    try:
        with (
            OpenAIEmbedder(
                model="m",
                dim=2,
                base_url=f"http://127.0.0.1:{port}/v1",
                timeout=0.2,
                max_retries=1,
                backoff=0.0,
            ) as emb,
            pytest.raises(ModelError, match="2 attempts"),
        ):
            emb.embed(["x"])
    finally:
        sock.close()


def test_openai_embedder_argument_checks() -> None:
    with pytest.raises(ValueError):
        OpenAIEmbedder(model="", dim=2)
    with pytest.raises(ValueError):
        OpenAIEmbedder(model="m", dim=0)
    emb = OpenAIEmbedder(model="m", dim=2, base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError):
        emb.embed("a single string")
    with pytest.raises(TypeError):
        emb.embed(["ok", 3])  # type: ignore[list-item]
    emb.close()


# -- WordLlama and hash ---------------------------------------------------------------------


def test_wordllama_embeds_offline_and_normalised() -> None:
    emb = WordLlamaEmbedder()
    assert isinstance(emb, Embedder)
    out = emb.embed(["the cat sat on the mat", "a kitten rested on a rug", "quarterly tax filing"])
    assert out.shape == (3, 256) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    sims = out @ out.T
    assert sims[0, 1] > sims[0, 2]
    assert emb.embed([]).shape == (0, 256)
    # one model per process
    from actormem.models import embedders

    first = embedders._load_wordllama()
    assert WordLlamaEmbedder().embed(["x"]).shape == (1, 256)
    assert embedders._load_wordllama() is first


def test_wordllama_embeds_one_text_as_it_does_in_a_batch() -> None:
    """A single text (a single write, a query) takes a shorter path; its vector is the
    batch path's bit for bit -- a memory written alone and one written in a batch must
    rank the same."""
    from actormem.models import embedders

    model = embedders._load_wordllama()
    rng = np.random.default_rng(3)
    words = ["the", "tea", "trains", "Alice", "12", "345", "über", "naïve", "東京", "🙂", "x"]
    texts = ["", " ", "a", "single durable write number 7 about tea and trains"]
    texts += [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(200)]
    for text in texts:
        alone = model.embed([text], 256)
        in_batch = model.embed([text, text], 256)[:1]  # the batch path (no padding)
        assert alone.dtype == np.float32 and alone.shape == (1, 256)
        assert alone.tobytes() == in_batch.tobytes(), text
    emb = WordLlamaEmbedder()
    batch = emb.embed(texts[:50])
    for i, text in enumerate(texts[:50]):
        np.testing.assert_allclose(emb.embed([text])[0], batch[i], rtol=0, atol=1e-6)


def test_hash_embedder_is_deterministic() -> None:
    a, b = HashEmbedder(32), HashEmbedder(32)
    x = a.embed(["hello world", "hello there"])
    np.testing.assert_array_equal(x, b.embed(["hello world", "hello there"]))
    assert x[0] @ x[1] > 0.3
    assert a.embed([""]).tolist() == [[0.0] * 32]
    with pytest.raises(ValueError):
        HashEmbedder(4)


@pytest.mark.parametrize("rows", [1, 3])
def test_unit_rows_checks_and_scales_as_the_separate_steps_did(rows: int) -> None:
    """The finiteness check rides on the norms; the numbers are normalise_rows' exactly."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        arr = rng.standard_normal((rows, 16)).astype(np.float32)
        want = normalise_rows(arr)
        got = arr.copy()
        assert unit_rows(got) is None
        assert got.tobytes() == want.tobytes()
    zero = np.zeros((rows, 4), dtype=np.float32)
    assert unit_rows(zero) is None and not zero.any()  # an empty text: zero stays zero
    with np.errstate(over="ignore"):  # finite, but its norm overflows (as it did before)
        huge = np.full((rows, 4), 3e38, dtype=np.float32)
        assert unit_rows(huge) is None
        assert huge.tobytes() == normalise_rows(np.full((rows, 4), 3e38, np.float32)).tobytes()
    for value in (np.nan, np.inf, -np.inf):
        bad = np.ones((rows, 4), dtype=np.float32)
        bad[rows - 1, 2] = value
        before = bad.copy()
        assert unit_rows(bad) == rows - 1
        assert np.array_equal(bad, before, equal_nan=True)  # left as it was
        with pytest.raises(ModelError, match=f"row {rows - 1}"):
            checked_unit_rows(before, rows, 4)


def test_check_embeddings() -> None:
    good = np.ones((2, 3), dtype=np.float64)
    assert check_embeddings(good, 2, 3).dtype == np.float32
    with pytest.raises(ModelError, match="shape"):
        check_embeddings(good, 3, 3)
    with pytest.raises(ModelError, match="numpy"):
        check_embeddings([[1.0]], 1, 1)
    bad = good.copy()
    bad[1, 2] = np.inf
    with pytest.raises(ModelError, match="row 1"):
        check_embeddings(bad, 2, 3)
