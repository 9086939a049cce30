"""The built book, opened page by page in a real browser (headless Chromium via Playwright).

Run after ``make book``::

    .venv/bin/python -m pytest tests/browser

(not part of ``make test``; ``.ci/run`` runs it after building the book). It serves
``_build/html`` on 127.0.0.1 and opens every page listed in ``_toc.yml``. Each page must
load, show a level-1 heading, typeset all its math with no MathJax error, show every image,
raise no JavaScript error, and ask nothing of any host other than 127.0.0.1 (no CDN); on a
chapter page no code cell (folded ones opened) is wider than the page at 1280 px.
Screenshots of the home page and chapter 1 go to ``ci-output/screenshots/``.

The browser is ``/usr/bin/chromium`` (Debian's package, ``apt-get install chromium``), never
one downloaded by Playwright; ``CHROMIUM=/path/to/browser`` picks another Chromium-based binary
(``.ci/run`` sets it to Google Chrome on an Ubuntu machine without a Chromium there).
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "ci-output" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
# sphinx-thebe declares this constant twice on every page (Chromium words it as
# "Identifier 'THEBE_JS_URL' has already been declared"); thebe is never activated here.
HARMLESS_PAGE_ERRORS = [("THEBE_JS_URL", "has already been declared")]
SCREENSHOT_PAGES = {"book/intro": "index.png", "notebooks/01_attention": "chapter01.png"}


def toc_pages() -> list[str]:
    """Every document of ``_toc.yml`` (without extension), root first."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                pages.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    walk(toc.get("sections"))
    return [str(Path(p).with_suffix("")) if Path(p).suffix in (".md", ".ipynb") else p
            for p in pages]


PAGES = toc_pages()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@pytest.fixture(scope="module")
def base_url():
    if not (SITE / "index.html").is_file():
        pytest.fail(f"{SITE / 'index.html'} does not exist: build the book first (make book)")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium, or set "
                    "CHROMIUM=/path/to/chromium-or-chrome (never `playwright install`)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                     headless=True)
        yield browser
        browser.close()


def test_toc_lists_the_home_page_first():
    assert PAGES[0] == "book/intro"
    assert len(PAGES) == len(set(PAGES)), "a page is listed twice in _toc.yml"


@pytest.mark.parametrize("doc", PAGES)
def test_page(doc, base_url, browser):
    from playwright.sync_api import expect

    source = next((ROOT / f"{doc}{ext}" for ext in (".md", ".ipynb")
                   if (ROOT / f"{doc}{ext}").exists()), None)
    assert source is not None, f"{doc}: listed in _toc.yml but neither {doc}.md nor .ipynb exists"

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    foreign: list[str] = []
    failed: list[str] = []
    page_errors: list[str] = []

    def route(route):
        url = route.request.url
        parts = urlparse(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname != "127.0.0.1":
            foreign.append(url)
            route.abort()
        else:
            route.continue_()

    context.route("**/*", route)
    page.on("pageerror", lambda exc: page_errors.append(str(exc)))
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.on("requestfailed", lambda r: failed.append(f"{r.failure} {r.url}")
            if urlparse(r.url).hostname == "127.0.0.1" else None)

    problems: list[str] = []
    try:
        response = page.goto(f"{base_url}/{doc}.html", wait_until="load")
        assert response is not None and response.status == 200, (
            f"{doc}: HTTP {response.status if response else 'no response'}")

        heading = page.get_by_role("heading", level=1)
        expect(heading.first).to_be_visible()
        if not heading.first.inner_text().strip():
            problems.append("empty level-1 heading")

        if page.locator(".math").count():
            try:
                page.wait_for_function("() => window.MathJax && window.MathJax.startup"
                                       " && window.MathJax.startup.promise", timeout=20_000)
                page.evaluate("() => window.MathJax.startup.promise")
            except Exception as exc:  # reported below with the other problems
                problems.append(f"MathJax did not start: {str(exc).splitlines()[0]}")
            untypeset = page.evaluate(
                "() => [...document.querySelectorAll('.math')]"
                ".filter(e => !e.querySelector('mjx-container'))"
                ".map(e => e.textContent.slice(0, 60))")
            if untypeset:
                problems.append(f"{len(untypeset)} math elements not typeset, e.g. {untypeset[:3]}")
            merrors = page.locator("mjx-merror").all_inner_texts()
            if merrors:
                problems.append(f"MathJax errors: {merrors[:5]}")

        page.evaluate("""async () => {
            for (const img of document.images) img.loading = 'eager';
            await Promise.all([...document.images].map(img => img.complete ? null :
                new Promise(done => { img.onload = img.onerror = done; })));
        }""")
        broken = page.evaluate(
            "() => [...document.images].filter(i => !(i.naturalWidth > 0))"
            ".map(i => i.src.slice(0, 120))")
        if broken:
            problems.append(f"images that did not load: {sorted(set(broken))}")

        if doc.startswith("notebooks/"):
            # every code cell, folded ones opened, shows its full lines at 1280 px
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            cut = page.evaluate(
                "() => [...document.querySelectorAll('.cell_input pre')]"
                ".filter(e => e.scrollWidth > e.clientWidth + 1)"
                ".map(e => e.textContent.split('\\n').reduce((a, b) => b.length > a.length ? b : a)"
                ".slice(0, 110))")
            if cut:
                problems.append(f"{len(cut)} code cells wider than the page at 1280 px "
                                f"(their longest lines: {cut[:3]})")

        page.wait_for_load_state("networkidle")
        if doc in SCREENSHOT_PAGES:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / SCREENSHOT_PAGES[doc]), full_page=True)
    finally:
        context.close()

    if foreign:
        problems.append(f"requests to hosts other than 127.0.0.1: {sorted(set(foreign))}")
    if failed:
        problems.append(f"failed requests: {sorted(set(failed))}")
    real_errors = [e for e in page_errors
                   if not any(all(part in e for part in harmless)
                              for harmless in HARMLESS_PAGE_ERRORS)]
    if real_errors:
        problems.append(f"JavaScript errors: {real_errors}")
    assert not problems, f"{doc}:\n  " + "\n  ".join(problems)


def test_results_page_shows_every_claim_and_its_figure(base_url, browser):
    """The claims table has one row per entry of book/claims.yml, each with a verdict, and
    the figure drawn at build time is shown."""
    claims = yaml.safe_load((ROOT / "book" / "claims.yml").read_text(encoding="utf-8"))
    page = browser.new_page()
    try:
        page.goto(f"{base_url}/book/results.html", wait_until="load")
        rows = page.locator("table.results-claims tbody tr")
        assert rows.count() == len(claims), (rows.count(), len(claims))
        verdicts = [rows.nth(i).locator("td").last.locator("strong").first.inner_text()
                    for i in range(rows.count())]
        assert set(verdicts) <= {"ahead", "behind", "tie", "better", "worse", "equal"}, verdicts
        figure = page.locator("figure.results-claims-figure img")
        assert figure.count() == 1
        size = figure.evaluate("img => [img.complete, img.naturalWidth, img.clientWidth]")
        assert size[0] and size[1] > 0 and size[2] > 300, f"claims figure not shown: {size}"
    finally:
        page.close()
