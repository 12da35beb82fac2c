"""The explorer in a real browser: headless Debian chromium through Selenium.

Each page is opened, a search run, a memory's history opened, an event
watched arriving live after ``rt.add(...)``, and every memory's content
checked to stay text.  Screenshots go to ``ACTORMEM_UI_SCREENSHOTS`` (``make
screenshots`` writes the README's) or a temporary folder.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from actormem import MemoryRuntime, Msg
from tests.ui._seed import XSS

Agent = tuple[MemoryRuntime, dict[str, str]]
_WAIT = 30.0  # upper bound of a wait on the page (the machine is shared)


def _url(rt: MemoryRuntime, path: str) -> str:
    assert rt.ui is not None
    return rt.ui.url.rstrip("/") + path


def _shot(driver: Any, folder: Path, name: str) -> Path:
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1000 and height >= 600
    return path


def _wait(driver: Any) -> WebDriverWait:  # type: ignore[type-arg]
    return WebDriverWait(driver, _WAIT)


def _no_script_ran(driver: Any) -> None:
    assert driver.execute_script("return window.__pwned === undefined") is True


def test_every_page_opens_and_shows_the_store(agent: Agent, browser: Any, shots: Path) -> None:
    rt, _ids = agent
    d = browser
    d.get(_url(rt, "/"))
    cards = d.find_elements(By.CSS_SELECTOR, ".ns-card")
    titles = " ".join(c.text for c in cards)
    assert "ada" in titles and "bob" in titles and "travel#facts" in titles
    _shot(d, shots, "namespaces")

    d.find_element(By.ID, "nav-timeline").click()
    _wait(d).until(ec.presence_of_element_located((By.ID, "timeline-chart")))
    rects = d.find_elements(By.CSS_SELECTOR, "#timeline-chart rect")
    assert len(rects) >= 10  # a bar segment per day and kind
    legend = d.find_element(By.CSS_SELECTOR, ".legend").text
    assert "episode" in legend and "fact" in legend and "preference" in legend
    rows = d.find_elements(By.CSS_SELECTOR, "#memories tbody tr")
    assert len(rows) == 38  # 39 seeded, one deleted
    _shot(d, shots, "timeline")

    d.find_element(By.ID, "nav-facts").click()
    facts = _wait(d).until(ec.presence_of_element_located((By.ID, "facts"))).text
    assert "home_airport" in facts and "BER (Brandenburg)" in facts and "window" in facts
    _shot(d, shots, "facts")

    d.find_element(By.ID, "nav-journal").click()
    text = _wait(d).until(ec.presence_of_element_located((By.ID, "journal-text"))).text
    assert "Plan Ada's Lisbon trip" in text  # NOW.md
    tabs = d.find_element(By.ID, "journal-tabs").text
    assert "LOG.md" in tabs and "MEMORY.md" in tabs and "DREAMS.md" in tabs
    d.find_element(By.LINK_TEXT, "LOG.md").click()
    log_text = _wait(d).until(ec.presence_of_element_located((By.ID, "journal-text"))).text
    assert "search_flights" in log_text
    d.find_element(By.LINK_TEXT, "MEMORY.md").click()
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "journal-text"), "allergic"))
    _shot(d, shots, "journal")
    _no_script_ran(d)


def test_search_shows_score_parts_and_opens_history(
    agent: Agent, browser: Any, shots: Path
) -> None:
    rt, ids = agent
    d = browser
    d.get(_url(rt, "/search"))
    box = d.find_element(By.ID, "q")
    box.send_keys("where does Ada live now?")
    d.find_element(By.ID, "search-go").click()
    hits = _wait(d).until(ec.presence_of_all_elements_located((By.CSS_SELECTOR, "#hits .hit")))
    assert "Berlin" in hits[0].text
    assert d.find_element(By.ID, "q").get_attribute("value") == "where does Ada live now?"
    labels = [e.text for e in hits[0].find_elements(By.CSS_SELECTOR, ".part .lbl")]
    assert labels == ["keyword", "vector", "soft match", "speaker", "time", "fused", "relevance"]
    nums = [float(e.text) for e in hits[0].find_elements(By.CSS_SELECTOR, ".part .num")]
    assert nums[0] == pytest.approx(1.0) and 0 < nums[1] <= 1  # best keyword hit, some cosine
    _shot(d, shots, "search")

    hits[0].find_element(By.CSS_SELECTOR, "a.mem-link").click()
    history = _wait(d).until(ec.presence_of_element_located((By.ID, "history")))
    items = history.find_elements(By.TAG_NAME, "li")
    ops = [i.find_element(By.CLASS_NAME, "op").text for i in items]
    assert ops[:3] == ["ADD", "UPDATE", "UPDATE"]  # then the dream's promotion to MEMORY.md
    assert "Ada lives in Paris" in items[1].find_element(By.TAG_NAME, "del").text
    assert "Ada lives in Berlin" in items[1].find_element(By.TAG_NAME, "ins").text
    assert "I moved to Berlin" in items[1].text  # the reason
    assert d.current_url.split("?")[0].endswith(f"/memory/{ids['home']}")
    assert not d.find_elements(By.ID, "edit-delete")  # read-only: no edit buttons
    _shot(d, shots, "history")


def test_memory_content_stays_text(agent: Agent, browser: Any) -> None:
    rt, ids = agent
    d = browser
    for path in (
        "/timeline",
        f"/memory/{ids['xss']}?user=ada&agent=travel",
        "/search?user=ada&agent=travel&q=pasted+note&mode=keyword",
    ):
        d.get(_url(rt, path))
        body = d.find_element(By.TAG_NAME, "body").text
        assert "<script>window.__pwned = 1</script>" in body, path  # shown as text
        assert not d.find_elements(By.CSS_SELECTOR, "main script, main img")
        _no_script_ran(d)
    # Live: an event and the context carry the same text to the page's JavaScript.
    d.get(_url(rt, "/live"))
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "status"), "live"))
    rt.add(Msg.user(f"please remember {XSS}"))
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "events"), "window.__pwned = 1"))
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "context"), "window.__pwned = 1"))
    assert not d.find_elements(By.CSS_SELECTOR, "#events img, #context img, #events script")
    _no_script_ran(d)


def test_an_event_arrives_live_after_add(agent: Agent, browser: Any, shots: Path) -> None:
    rt, _ids = agent
    d = browser
    d.get(_url(rt, "/live"))
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "status"), "live"))
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "context"), "Tasca do Chico"))
    marker = "Could you also book a taxi to the airport on 17 March?"
    rt.add(Msg.user(marker))
    row = _wait(d).until(
        ec.presence_of_element_located(
            (By.XPATH, f"//ol[@id='events']/li[@data-type='MessageAdded'][contains(., '{marker}')]")
        )
    )
    assert "MessageAdded" in row.text
    # The next context now ends with that message.
    _wait(d).until(
        lambda drv: drv.find_elements(By.CSS_SELECTOR, "#context li.msg")[-1].text.endswith(marker)
    )
    rt.add(Msg.assistant("Booked: a taxi from your hotel at 07:00 on 17 March."))
    rt.record(rt.messages()[-2:])
    rt.flush()
    _wait(d).until(ec.text_to_be_present_in_element((By.ID, "events"), "recorded"))
    _shot(d, shots, "live")


def test_edits_in_the_browser_leave_history_rows(tmp_path: Path, browser: Any) -> None:
    from tests.ui._seed import make_runtime, seed_runtime

    with make_runtime(tmp_path) as rt:
        ids = seed_runtime(rt)
        rt.serve_ui(port=0, allow_edits=True)
        d = browser
        mid = ids["Ada wants to visit Sintra on a day trip"]
        d.get(_url(rt, f"/memory/{mid}?user=ada&agent=travel"))
        d.find_element(By.ID, "edit-pin").click()
        _wait(d).until(ec.presence_of_element_located((By.ID, "edit-unpin")))
        d.find_element(By.ID, "edit-delete").click()
        _wait(d).until(ec.text_to_be_present_in_element((By.ID, "history"), "DELETE"))
        assert rt.store is not None
        ops = [(h.op, h.reason) for h in rt.store.history(rt.namespace, mid)]
        assert ops[0][0] == "ADD"
        assert ops[-2:] == [
            ("UPDATE", "edited in the memory explorer: pin"),
            ("DELETE", "edited in the memory explorer: delete"),
        ]
        assert rt.store.get(rt.namespace, mid) is None
        assert "pinned" in rt.store.get(rt.namespace, mid, include_deleted=True).tags  # type: ignore[union-attr]
