"""Summarizers: the offline extractive one and the model one with timeout fallback."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from structlog.testing import capture_logs

from actormem.compress import (
    AutoContextConfig,
    EstimateTokenCounter,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
    render_transcript,
)
from actormem.messages import Msg
from actormem.models.base import ModelError

FILLER = [
    "that sounds nice, thanks for telling me about it",
    "haha yes I know what you mean",
    "anyway how are things going on your side",
    "it has been a long week but it is fine",
]


def _chat(facts: Sequence[str], filler: int = 60) -> list[Msg]:
    msgs: list[Msg] = []
    for i in range(filler):
        text = FILLER[i % len(FILLER)]
        msgs.append(Msg.user(text) if i % 2 == 0 else Msg.assistant(text))
        if i % (filler // len(facts)) == 0 and i // (filler // len(facts)) < len(facts):
            msgs.append(Msg.user(facts[i // (filler // len(facts))]))
    return msgs


FACTS = [
    "Maria Lopez moved to Porto on 12 March 2023.",
    "The deploy failed with error E4021 on the payments service.",
    "We decided to switch the database to Postgres 16 next week.",
    "Todo: Kenji needs to renew the TLS certificate before June 30.",
]


def test_extractive_keeps_informative_sentences_in_order() -> None:
    s = ExtractiveSummarizer()
    out = s.summarize(_chat(FACTS), target_tokens=90, instruction="")
    assert out.summarizer == "extractive" and not out.fallback
    for fact in FACTS:
        assert fact in out.text
    positions = [out.text.index(f) for f in FACTS]
    assert positions == sorted(positions)
    assert "haha" not in out.text
    assert EstimateTokenCounter().count(out.text) <= 90 + 20  # speaker labels add a little
    assert isinstance(s, Summarizer)


def test_extractive_is_deterministic_and_handles_edges() -> None:
    s = ExtractiveSummarizer()
    msgs = _chat(FACTS)
    assert (
        s.summarize(msgs, target_tokens=50, instruction="").text
        == s.summarize(msgs, target_tokens=50, instruction="").text
    )
    assert s.summarize([], target_tokens=50, instruction="").text == ""
    huge = Msg.user("word " * 5000 + ". Final note: Ana paid 300 EUR on 2024-05-01.")
    out = s.summarize([huge], target_tokens=10, instruction="")
    assert out.text  # at least one (clipped) sentence
    tool = Msg.tool_call("search", {"q": "flights to Lisbon"}, call_id="c1")
    res = Msg.tool_result("c1", "Error: upstream timeout after 30 s", is_error=True)
    out = s.summarize([tool, res], target_tokens=80, instruction="")
    assert "search" in out.text and "failed" in out.text and "timeout" in out.text


def test_extractive_speed_on_1000_messages() -> None:
    msgs = _chat(FACTS, filler=1000)
    msgs += [
        Msg.assistant(f"Step {i}: processed batch {i * 7} for client Acme in {i % 9} ms.")
        for i in range(200)
    ]
    s = ExtractiveSummarizer()
    t0 = time.perf_counter()
    s.summarize(msgs, target_tokens=500, instruction="")
    assert (
        time.perf_counter() - t0 < 1.0
    )  # generous bound for slow CI; the bench reports real figures


def test_render_transcript_clips_and_labels() -> None:
    msgs = [
        Msg.user("hi", name="Ana"),
        Msg.tool_call("grep", {"pattern": "TODO"}, call_id="c1"),
        Msg.tool_result("c1", "a" * 10_000),
    ]
    text = render_transcript(msgs, max_chars=1200)
    assert "[Ana (user)] hi" in text
    assert "called grep" in text
    assert "grep returned" in text
    assert len(text) < 2000


class FakeModel:
    """A chat model double: answers, sleeps, or fails."""

    name = "fake"

    def __init__(
        self, reply: str = "", *, sleep: float = 0.0, error: Exception | None = None
    ) -> None:
        self.reply, self.sleep, self.error = reply, sleep, error
        self.calls: list[tuple[Sequence[Msg], float | None]] = []
        self.released = threading.Event()

    def chat(
        self, messages: Sequence[Msg], *, tools: Any = None, timeout: float | None = None
    ) -> Msg:
        self.calls.append((messages, timeout))
        if self.sleep:
            self.released.wait(self.sleep)  # ignores its timeout, like a hung HTTP call
        if self.error:
            raise self.error
        return Msg.assistant(self.reply)

    async def achat(
        self, messages: Sequence[Msg], *, tools: Any = None, timeout: float | None = None
    ) -> Msg:
        return self.chat(messages, tools=tools, timeout=timeout)


def test_model_summarizer_uses_model_and_prompt() -> None:
    model = FakeModel("The user, Maria Lopez, moved to Porto on 12 March 2023.")
    cfg = AutoContextConfig(model_timeout=5)
    s = ModelSummarizer(model, cfg)
    out = s.summarize(
        _chat(FACTS), target_tokens=100, instruction=cfg.prompt_for("summarize_rounds")
    )
    assert out.summarizer == "model:fake" and not out.fallback
    assert out.text.startswith("The user")
    ((prompt, timeout),) = model.calls
    assert timeout == 5
    assert prompt[0].role == "system" and "third person" in prompt[0].text
    assert "words" in prompt[0].text
    assert "Maria Lopez" in prompt[1].text


def test_model_summarizer_times_out_and_falls_back() -> None:
    model = FakeModel("late", sleep=300)  # released below
    s = ModelSummarizer(model, AutoContextConfig(model_timeout=0.2))
    t0 = time.perf_counter()
    with capture_logs() as logs:
        out = s.summarize(_chat(FACTS), target_tokens=90, instruction="Summarize.")
    elapsed = time.perf_counter() - t0
    model.released.set()
    assert elapsed < 60  # the 0.2 s timeout, not the model's 300 s
    assert out.fallback and out.summarizer == "extractive"
    assert "TimeoutError" in out.error and "0.2" in out.error
    assert FACTS[0] in out.text
    assert any(e["event"] == "summarizer_fallback" and e["log_level"] == "warning" for e in logs)


@pytest.mark.parametrize(
    ("model", "needle"),
    [
        (FakeModel(error=ModelError("HTTP 503")), "ModelError: HTTP 503"),
        (FakeModel(error=TimeoutError("read timeout")), "TimeoutError"),
        (FakeModel("   "), "empty summary"),
    ],
)
def test_model_summarizer_falls_back_on_errors(model: FakeModel, needle: str) -> None:
    out = ModelSummarizer(model, AutoContextConfig(model_timeout=2)).summarize(
        _chat(FACTS), target_tokens=90, instruction="Summarize."
    )
    assert out.fallback and needle in out.error
    assert out.summarizer == "extractive" and FACTS[1] in out.text


def test_model_summarizer_rejects_bad_timeout() -> None:
    with pytest.raises(ValueError, match="timeout"):
        ModelSummarizer(FakeModel("x"), timeout=0)


# -- what the extractive summary spends its budget on --------------------------------------

CASUAL = [  # (what the user says in passing, the name, the number)
    ("oh and Noor Berg finally told me the gate code, it's 4417", "Noor Berg", "4417"),
    ("btw the invoice from Lars Okafor came in at 9120 euros, ouch", "Lars Okafor", "9120"),
    ("funny story, Aisha Mensah has 37 houseplants now", "Aisha Mensah", "37"),
    ("we booked table 58 at the tapas place, Diego Silva sorted it", "Diego Silva", "58"),
    ("the bus Pavel Novak takes is the 311, it stops right outside", "Pavel Novak", "311"),
    ("I think Rosa Haddad paid 2250 for that old bike, which is crazy", "Rosa Haddad", "2250"),
]


def _busy_chat() -> list[Msg]:
    """Casual facts inside chatty messages, among chit-chat and tool runs with logs."""
    msgs: list[Msg] = []
    for i in range(240):
        if i % 40 == 5:
            said = CASUAL[i // 40][0]
            msgs.append(Msg.user(f"It's been such a long week honestly. {said}. Anyway."))
        elif i % 3 == 0:
            call = Msg.tool_call("run_shell", {"cmd": "pytest -q"}, call_id=f"c{i}")
            log = "\n".join(
                f"12:{k:02d} INFO worker-{k % 4} processed batch {i * 7 + k}" for k in range(40)
            )
            msgs += [call, Msg.tool_result(f"c{i}", log, name="run_shell")]
        else:
            msgs.append(Msg.user(FILLER[i % len(FILLER)]))
            msgs.append(Msg.assistant(FILLER[(i + 1) % len(FILLER)]))
    return msgs


def test_extractive_spends_the_budget_on_information_not_volume() -> None:
    msgs = _busy_chat()
    counter = EstimateTokenCounter()
    target = 400
    text = ExtractiveSummarizer(counter).summarize(msgs, target_tokens=target).text
    for _, name, number in CASUAL:  # every casual fact survives
        assert name in text and number in text, (name, number, text)
    assert text.count("processed batch") <= 2  # 80 runs of one log template: read once
    for line in FILLER:
        assert text.count(line) <= 1  # chit-chat repeated is not repeated in the summary
    assert counter.count(text) <= target  # speaker labels counted
    for line in FILLER:  # room left: every distinct line is in, once
        assert line in text


def test_extractive_fills_its_target_without_overshooting_it() -> None:
    counter = EstimateTokenCounter()
    msgs = [
        Msg.user(f"Item {i}: {name} ordered {i * 37 + 5} crates of {fruit} for {town}.", name=who)
        for i, (name, fruit, town, who) in enumerate(
            (n, f, t, w)
            for n in ("Ana Ruiz", "Ivo Berg", "Mei Wong", "Tom Ek")
            for f in ("plums", "figs", "limes", "pears", "kiwis")
            for t in ("Porto", "Lyon", "Oslo", "Graz", "Bern", "Riga")
            for w in ("Sam", "Kim")
        )
    ]
    for target, fill in ((60, 0.6), (300, 0.9), (1200, 0.9)):  # a sentence is ~20 tokens
        text = ExtractiveSummarizer(counter).summarize(msgs, target_tokens=target).text
        assert target * fill <= counter.count(text) <= target, (target, counter.count(text))


def test_extractive_keeps_references_not_offloaded_output() -> None:
    big = "\n".join(f"line {k}: checksum deadbeef{k:04d} ok" for k in range(3))
    offloaded = Msg.tool_result(
        "c1",
        '[output offloaded as off_123abc, 900 tokens; call context_reload(offload_id="off_123abc")'
        f" to read the original] {big}",
        name="run_shell",
    )
    msgs = [
        Msg.user("My landlord Ivo Petrov raised the rent to 1430 this month."),
        Msg.tool_call("run_shell", {"cmd": "sha256sum *"}, call_id="c1"),
        offloaded,
        Msg.assistant("Checksums verified."),
    ]
    text = ExtractiveSummarizer().summarize(msgs, target_tokens=200).text
    assert "off_123abc" in text  # the reference is kept
    assert "deadbeef" not in text  # the offloaded output is not summarized again
    assert "Ivo Petrov" in text and "1430" in text


def test_extractive_keeps_who_said_what() -> None:
    msgs = [
        Msg.user("I adopted a greyhound called Pixel in 2021.", name="Andrew"),
        Msg.user("My sister Noor moved to Oslo in March.", name="Audrey"),
    ]
    text = ExtractiveSummarizer().summarize(msgs, target_tokens=200).text
    assert "- Andrew: I adopted a greyhound called Pixel" in text
    assert "- Audrey: My sister Noor moved to Oslo" in text


# -- a summary that would make the context larger is never applied -------------------------


def test_a_rambling_model_summary_falls_back_over_http() -> None:
    from actormem.models.openai import OpenAIChatModel
    from tests._strict_openai import Answer, Request, strict_server

    def ramble(req: Request) -> Answer:  # longer than what it was asked to summarize
        return Answer(text="In this conversation the user said many things. " * 200)

    msgs = _chat(FACTS, filler=8)
    with strict_server(ramble) as srv:
        model = OpenAIChatModel(srv.url, "small", max_retries=0)
        out = ModelSummarizer(model, AutoContextConfig(model_timeout=10)).summarize(
            msgs, target_tokens=40, instruction="Summarize."
        )
    assert out.fallback and out.summarizer == "extractive"
    assert "is not shorter than the" in out.error


def test_compress_never_applies_a_pass_that_grows_the_context() -> None:
    from actormem.compress import Summary, compress

    class Verbose:
        name = "verbose"

        def summarize(self, msgs: Sequence[Msg], *, target_tokens: int, instruction: str) -> Any:
            return Summary("a very long and entirely useless summary " * 100, self.name)

    msgs: list[Msg] = []
    for i in range(15):
        msgs += [Msg.user(f"question {i} about the plan"), Msg.assistant(f"answer {i}")]
    out = compress(msgs, AutoContextConfig(msg_threshold=10), Verbose())
    # Without the check, summarize_rounds took this context from ~330 to ~980 tokens.
    assert out.tokens_after <= out.tokens_before and out.applied == []
    assert "would not shrink the context: summarize_rounds" in out.reason


def test_facts_survive_compression_as_the_conversation_grows() -> None:
    """The runtime compresses every time the threshold is reached, not once at the end.

    Each pass summarizes the earlier summary again; when that summary was cut
    to ``summary_ratio`` at every pass, the oldest facts decayed away (here 7
    of 45 survived; a 1,000-message conversation ended at 3% of its tokens
    with 4 of 45).  An earlier summary now keeps its size, up to
    ``summary_max_tokens``.
    """
    import sys
    from pathlib import Path

    from actormem.compress import compress, needs_compression

    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks.compress_eval import varied

    msgs, facts = varied(n=400)
    config = AutoContextConfig(msg_threshold=40)
    counter = EstimateTokenCounter()
    summarizer = ExtractiveSummarizer(counter)
    work: list[Msg] = []
    passes = 0
    for msg in msgs:
        work.append(msg)
        if needs_compression(work, config, counter)[0]:
            work = compress(work, config, summarizer, counter).apply(work)
            passes += 1
    text = "\n".join(m.text for m in work)
    kept = [f for f in facts if all(part in text for part in f)]
    assert passes >= 20
    assert len(kept) >= 0.9 * len(facts), (len(kept), len(facts))
    assert counter.count_msgs(work) <= 0.3 * counter.count_msgs(msgs)
    summaries = [m for m in work if m.metadata.get("strategy") == "summarize_rounds"]
    assert len(summaries) == 1


def test_a_reply_to_a_question_is_preferred_over_a_remark_like_it() -> None:
    msgs = [
        Msg.user("Where did you and Rosa go hiking on Saturday?", name="Ines"),
        Msg.user("We walked the cliff path near Howth, windy but lovely.", name="Tom"),
        Msg.user("Lovely indeed.", name="Ines"),
        Msg.user("We walked the canal path near Tullamore, muddy but lovely.", name="Tom"),
    ]
    counter = EstimateTokenCounter()
    text = ExtractiveSummarizer(counter).summarize(msgs, target_tokens=30).text
    assert "Howth" in text and "Tullamore" not in text, text


def test_an_earlier_summary_is_displaced_only_by_something_clearly_better() -> None:
    earlier = Msg.user(
        "Summary of earlier conversation (40 messages) (offloaded as off_1):\n"
        "- Ana: We adopted a greyhound called Pixel.\n"
        "- Ben: My sister Noor moved to Oslo in March.",
        actormem="summary",
        strategy="summarize_rounds",
    )
    new = [  # each as informative as an earlier line, and rarer within this span
        Msg.user(f"{who} booked {what} for Friday in {town}.", name="Ana")
        for who, what, town in (
            ("Kenji", "a kayak", "Bergen"),
            ("Lars", "a tandem", "Utrecht"),
            ("Olga", "a rowboat", "Kotor"),
            ("Idris", "a sidecar", "Tangier"),
        )
    ]
    counter = EstimateTokenCounter()
    text = ExtractiveSummarizer(counter).summarize([earlier, *new], target_tokens=40).text
    assert "Pixel" in text and "Noor moved to Oslo" in text, text
    assert "- Ben: My sister Noor" in text  # the earlier lines keep their speakers


def test_the_default_summary_size_keeps_most_answers_of_a_long_chat() -> None:
    """LoCoMo-like (two friends, 20 dated sessions, dense with news): >= 80% kept by default.

    The issue's LoCoMo goal, on a fixture committed with the code (LoCoMo is
    not): one pass and grown as the runtime compresses.  With the earlier
    summary size (0.2, 4,096 tokens) this chat kept 75% / 77%.
    """
    import sys
    from pathlib import Path

    from actormem.compress import compress, needs_compression

    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks.compress_eval import chat

    msgs, facts = chat()
    assert len(msgs) > 600 and len(facts) > 100

    def kept(work: list[Msg]) -> int:
        text = "\n".join(m.text for m in work)
        return sum(1 for f in facts if all(part in text for part in f))

    results = {}
    for label, config in (
        ("default", AutoContextConfig()),
        ("before", AutoContextConfig(summary_ratio=0.2, summary_max_tokens=4096)),
    ):
        counter = EstimateTokenCounter()
        summarizer = ExtractiveSummarizer(counter)
        one_pass = compress(msgs, config, summarizer, counter).apply(msgs)
        work: list[Msg] = []
        for msg in msgs:
            work.append(msg)
            if needs_compression(work, config, counter)[0]:
                work = compress(work, config, summarizer, counter).apply(work)
        assert len(work) < config.msg_threshold
        results[label] = (kept(one_pass), kept(work))
    assert min(results["default"]) >= 0.8 * len(facts), (results, len(facts))
    # A bigger summary keeps more: the fixture measures what the size is for.
    assert sum(results["before"]) < sum(results["default"]), results


def _on(day: int, hour: int, msg: Msg) -> Msg:
    """``msg`` as created on ``day`` May 2023 at ``hour`` UTC."""
    import datetime

    import msgspec

    when = datetime.datetime(2023, 5, day, hour, tzinfo=datetime.UTC).timestamp()
    return msgspec.structs.replace(msg, created_at=when)


def test_a_summary_keeps_the_day_each_line_was_said() -> None:
    """Messages carry only ``created_at``: a ``[8 May 2023]`` header starts each day's lines."""
    msgs = [
        _on(8, 9, Msg.user("I joined the rowing club at Ringsend today.", name="Aoife")),
        _on(8, 10, Msg.user("Nice, my brother Cathal rowed there in 2019.", name="Dev")),
        _on(9, 18, Msg.user("Our cat Miso had kittens this morning, four of them.", name="Aoife")),
        _on(9, 19, Msg.user("Four kittens! Send me photos of Miso.", name="Dev")),
    ]
    counter = EstimateTokenCounter()
    text = ExtractiveSummarizer(counter).summarize(msgs, target_tokens=200).text
    lines = text.split("\n")
    assert lines[0] == "[8 May 2023]", text
    rowing = next(i for i, line in enumerate(lines) if "rowing club" in line)
    kittens = next(i for i, line in enumerate(lines) if "kittens this morning" in line)
    assert rowing < lines.index("[9 May 2023]") < kittens, text
    assert lines[kittens].startswith("- Aoife: ")
    assert counter.count(text) <= 200
    plain = ExtractiveSummarizer(counter, dates=False).summarize(msgs, target_tokens=200).text
    assert "[8 May 2023]" not in plain and "rowing club" in plain


def test_a_later_pass_keeps_the_days_of_an_earlier_summary() -> None:
    from actormem.compress import compress

    config = AutoContextConfig(msg_threshold=12, last_keep=2)
    counter = EstimateTokenCounter()
    summarizer = ExtractiveSummarizer(counter)
    news = [
        "I started pottery classes in Stoneybatter.",
        "We booked a week in Porto for June.",
        "My sister Hanne moved to Tromsø.",
        "I ran my first 10k in 58 minutes.",
        "Our landlord fixed the boiler finally.",
        "I adopted a greyhound called Biscuit.",
        "Kofi taught me to make jollof rice.",
        "The allotment got 12 new raised beds.",
        "I passed the Portuguese B1 exam.",
        "Our choir sang Fauré at Christ Church.",
        "Grandma Edda turned 91 on Saturday.",
        "I sold the Volvo and bought a cargo bike.",
    ]
    said_on: dict[str, str] = {}
    work: list[Msg] = []
    passes = 0
    for day, line in enumerate(news, start=1):
        said_on[line] = f"[{day} May 2023]"
        work.append(_on(day, 12, Msg.user(line, name="Aoife")))
        work.append(_on(day, 13, Msg.user("Wow, good to hear!", name="Dev")))
        if len(work) >= config.msg_threshold:
            work = compress(work, config, summarizer, counter).apply(work)
            passes += 1
    assert passes >= 2
    summary = next(m for m in work if m.metadata.get("actormem") == "summary")
    lines = summary.text.split("\n")[1:]
    header = ""
    placed = []
    for line in lines:
        if line.startswith("["):
            header = line
            continue
        for sentence, day in said_on.items():
            if sentence in line:
                assert header == day, (sentence, header, summary.text)
                placed.append(sentence)
    # News from the first pass's span went through a later pass and kept its day.
    assert any(news.index(x) < 5 for x in placed), summary.text
