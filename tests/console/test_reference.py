"""The API reference at /docs in a real browser against `runpoint serve`: Swagger UI
renders every operation of the document, and the page asks nothing of any other host."""

from __future__ import annotations

from urllib.parse import urlsplit

import yaml
from playwright.sync_api import Browser, expect

from tests.http.conftest import SPEC

from .conftest import LAPTOP


def test_the_reference_renders_every_operation_offline(browser: Browser, server: str) -> None:
    context = browser.new_context(viewport=LAPTOP)
    hosts: set[str] = set()
    context.on("request", lambda request: hosts.add(urlsplit(request.url).netloc))
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        page.goto(f"{server}/docs")
        operations = sum(len(item) for item in yaml.safe_load(SPEC.read_text())["paths"].values())
        expect(page.locator(".opblock")).to_have_count(operations)
        expect(page.locator(".info .title")).to_contain_text("runpoint")
    finally:
        context.close()
    assert hosts == {urlsplit(server).netloc}
    assert errors == []
