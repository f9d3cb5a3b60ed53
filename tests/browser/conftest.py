"""Headless Debian Chromium driven by Playwright (no browser download: executable_path)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "_artifacts" / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Per module: Playwright's sync API keeps an event loop running in the main thread while it
    is open, which would break the async tests of later modules."""
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        pytest.fail("Debian chromium is not installed: `make test` installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):  # noqa: ANN001, ANN201
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    pg = context.new_page()
    pg.console_errors = []  # type: ignore[attr-defined]
    pg.on("console", lambda m: m.type == "error" and pg.console_errors.append(m.text))
    pg.on("pageerror", lambda e: pg.console_errors.append(str(e)))
    yield pg
    context.close()


HTMX_SETTLED = """() => !document.querySelector(
    '[hx-trigger="load"], .htmx-request, .htmx-swapping, .htmx-settling')"""
"""True once the page's load-time fragments (the feature page's documents) have arrived and settled: the
element that asks for one is swapped out for it, and HTMX marks requests, swaps and settles by class."""


def settled(page) -> None:  # noqa: ANN001
    """Wait for the page's HTMX fragments: what `networkidle` waited for, without its half second of quiet."""
    page.wait_for_function(HTMX_SETTLED, polling=50)


def shot(page, name: str) -> Path:  # noqa: ANN001
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture(scope="session")
def demo() -> Iterator[object]:
    """`prisma demo` (400 notes) with its pipeline finished: (url, key, concepts). Started in the
    background after collection (tests/conftest.py); this waits for its concepts."""
    from tests.browser.demo import running_demo

    with running_demo() as running:
        yield running


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test to use the shared demo pays for its pipeline (minutes on a CPU without bf16)."""
    for item in items:
        if "demo" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(900))
