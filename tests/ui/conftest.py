from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from actormem import MemoryRuntime
from tests.ui._seed import make_runtime, seed_runtime

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[MemoryRuntime, dict[str, str]]]:
    """A seeded runtime serving the explorer on a free port (read-only)."""
    rt = make_runtime(tmp_path)
    ids = seed_runtime(rt)
    rt.serve_ui(port=0)
    yield rt, ids
    rt.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Debian chromium driven by Selenium through the Debian chromedriver."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail(
            "the UI tests need Debian's chromium and chromium-driver: run `make test` "
            "(it installs them) or `apt-get install chromium chromium-driver`"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,860",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
    ):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where screenshots go: ACTORMEM_UI_SCREENSHOTS (``make screenshots``) or a temp folder."""
    folder = Path(os.environ.get("ACTORMEM_UI_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder
