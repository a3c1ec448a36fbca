"""Fixtures of the dashboard's browser tests: one headless Chromium per module (a new context, so
new cookies, per test), and processes that live as long as a module (a cluster and a dashboard)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from rmq.perf.procs import Processes
from tests.helpers.dashboard import PAGE_TIMEOUT_MS, chromium

expect.set_options(timeout=PAGE_TIMEOUT_MS)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="module")
def module_processes() -> Iterator[Processes]:
    """Processes started for a whole module, stopped after its last test."""
    processes = Processes()
    try:
        yield processes
    finally:
        processes.stop_all()


@pytest.fixture
def page(browser: Browser, site) -> Iterator[Page]:
    """A new browser context (its own cookies) on the module's ``site`` (a fixture each module
    defines: the dashboard it tests, at ``site.url``)."""
    context = browser.new_context(base_url=site.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()
