"""The built book, opened page by page in a real browser (headless Chromium via Playwright).

Run after ``make book``::

    .venv/bin/python -m pytest tests/browser

(not part of ``make test``; ``.ci/run`` runs it after building the book). It serves
``_build/html`` on 127.0.0.1 and opens every page listed in ``_toc.yml``, in both editions:
the English one at the root, the Chinese one under ``zh/`` (``make book`` builds both). Each
page must load, show a level-1 heading, typeset all its math with no MathJax error, show
every image, raise no JavaScript error, ask nothing of any host other than 127.0.0.1 (no
CDN), and link to the same page in the other edition (the language switch); on a chapter
page no code cell (folded ones opened) is wider than the page at 1280 px. Screenshots of the
home page and chapter 1 of each edition go to ``ci-output/screenshots/``.

The Chinese edition is also checked for what only it has: the language switch followed both
ways (served, and from ``file://``), the results page in Chinese, and Chinese search: a search
for 多头注意力 or 因果掩码 must list every page of the Chinese edition whose text contains
the term (it needs translated pages: a term no page contains yet fails the test, saying so).

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
# edition -> its folder in the site and the language of its pages (<html lang>)
EDITIONS = {"en": ("", "en"), "zh": ("zh/", "zh-CN")}
OTHER = {"en": "zh", "zh": "en"}
SEARCH_TERMS = ["多头注意力", "因果掩码"]


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


@pytest.mark.parametrize("edition", list(EDITIONS))
@pytest.mark.parametrize("doc", PAGES)
def test_page(doc, edition, base_url, browser):
    from playwright.sync_api import expect

    folder, lang = EDITIONS[edition]
    if not (SITE / folder / f"{doc}.html").is_file():
        pytest.fail(f"{SITE / folder / doc}.html does not exist: `make book` builds both "
                    "editions")

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
        response = page.goto(f"{base_url}/{folder}{doc}.html", wait_until="load")
        assert response is not None and response.status == 200, (
            f"{folder}{doc}: HTTP {response.status if response else 'no response'}")
        if page.evaluate("() => document.documentElement.lang") != lang:
            problems.append(f"<html lang> is not {lang!r}")
        switch = language_switch(page)
        expected = f"{base_url}/{EDITIONS[OTHER[edition]][0]}{doc}.html"
        if switch != expected:
            problems.append(f"language switch links to {switch!r}, not {expected!r}")

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
            name = SCREENSHOT_PAGES[doc] if edition == "en" else f"zh-{SCREENSHOT_PAGES[doc]}"
            page.screenshot(path=str(SCREENSHOTS / name), full_page=True)
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
    assert not problems, f"{folder}{doc}:\n  " + "\n  ".join(problems)


def language_switch(page) -> str | None:
    """The absolute URL of the page's link to the other edition (None: no link)."""
    links = page.locator(".bd-header-article a.course-language-switch")
    if links.count() != 1 or not links.first.is_visible():
        return None
    return links.first.evaluate("a => a.href")


VERDICTS = {"en": {"ahead", "behind", "inconclusive", "better", "worse", "equal"},
            "zh": {"领先", "落后", "无定论", "更好", "更差", "相等"}}


@pytest.mark.parametrize("edition", list(EDITIONS))
def test_results_page_shows_every_claim_and_its_figure(edition, base_url, browser):
    """The claims table has one row per entry of book/claims.yml, each with a verdict (in the
    edition's language), and the figure drawn at build time is shown."""
    claims = yaml.safe_load((ROOT / "book" / "claims.yml").read_text(encoding="utf-8"))
    page = browser.new_page()
    try:
        page.goto(f"{base_url}/{EDITIONS[edition][0]}book/results.html", wait_until="load")
        rows = page.locator("table.results-claims tbody tr")
        assert rows.count() == len(claims), (rows.count(), len(claims))
        verdicts = [rows.nth(i).locator("td").last.locator("strong").first.inner_text()
                    for i in range(rows.count())]
        assert set(verdicts) <= VERDICTS[edition], verdicts
        if edition == "zh":
            claim_cells = [rows.nth(i).locator("td").nth(1).inner_text()
                           for i in range(rows.count())]
            for cell, entry in zip(claim_cells, claims):
                assert " ".join(entry["zh"]["claim"].split()) in cell, (cell, entry["zh"])
        figure = page.locator("figure.results-claims-figure img")
        assert figure.count() == 1
        size = figure.evaluate("img => [img.complete, img.naturalWidth, img.clientWidth]")
        assert size[0] and size[1] > 0 and size[2] > 300, f"claims figure not shown: {size}"
    finally:
        page.close()


# ------------------------------------------------------------------ the Chinese edition
def test_language_switch_both_ways_keeps_the_page_and_the_section(base_url, browser):
    """From a chapter's section in English to the same section in Chinese and back."""
    page = browser.new_page()
    try:
        page.goto(f"{base_url}/notebooks/02_multi_head_attention.html", wait_until="load")
        section = page.locator("section[id]").nth(1).get_attribute("id")
        page.goto(f"{base_url}/notebooks/02_multi_head_attention.html#{section}",
                  wait_until="load")
        page.locator(".bd-header-article a.course-language-switch").click()
        page.wait_for_url(f"{base_url}/zh/notebooks/02_multi_head_attention.html#{section}")
        assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
        assert page.locator(f"section[id='{section}']").count() == 1, (
            f"the Chinese page has no section {section!r}")
        assert page.locator(".bd-header-article a.course-language-switch").inner_text() \
            == "English"
        page.locator(".bd-header-article a.course-language-switch").click()
        page.wait_for_url(f"{base_url}/notebooks/02_multi_head_attention.html#{section}")
        assert page.evaluate("() => document.documentElement.lang") == "en"
        assert page.locator(".bd-header-article a.course-language-switch").inner_text() \
            == "中文"
    finally:
        page.close()


@pytest.mark.parametrize("start, target", [
    ("notebooks/01_attention.html", "zh/notebooks/01_attention.html"),
    ("zh/book/setup.html", "book/setup.html"),
    ("zh/search.html", "search.html"),
])
def test_language_switch_from_file_urls(start, target, browser):
    """Opened from the disk (file://), the switch leads to the other edition's same page."""
    page = browser.new_page()
    try:
        page.goto((SITE / start).as_uri(), wait_until="domcontentloaded")
        href = page.locator(".bd-header-article a.course-language-switch").evaluate(
            "a => a.href")
        assert href == (SITE / target).as_uri(), (start, href)
        page.locator(".bd-header-article a.course-language-switch").click()
        page.wait_for_url((SITE / target).as_uri(), wait_until="domcontentloaded")
        assert page.get_by_role("heading", level=1).first.inner_text().strip()
    finally:
        page.close()


def _page_texts(folder: Path) -> dict[str, str]:
    """The article text of every page of an edition, by document name."""
    import html
    import re

    texts = {}
    for doc in PAGES:
        source = (folder / f"{doc}.html").read_text(encoding="utf-8")
        match = re.search(r'<article class="bd-article"[^>]*>(.*?)</article>', source, re.S)
        body = match.group(1) if match else source
        texts[doc] = html.unescape(re.sub(r"<[^>]+>", " ", body))
    return texts


@pytest.mark.parametrize("term", SEARCH_TERMS)
def test_chinese_search_finds_the_pages_of_a_term(term, base_url, browser):
    """Sphinx's Chinese search (jieba, with the course's terms as its user dictionary) lists
    every page of the Chinese edition that contains the term."""
    expected = sorted(doc for doc, text in _page_texts(SITE / "zh").items() if term in text)
    assert expected, (f"no page of the Chinese edition contains {term} yet: this test needs "
                      "translated pages (the catalogues of chapter 2, the glossary, ...)")
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_page()
    # What the page said, for the failure message if the search never finishes.
    said: list[str] = []
    page.on("console", lambda message: said.append(f"console {message.type}: {message.text}"))
    page.on("pageerror", lambda error: said.append(f"page error: {error}"))
    page.on("requestfailed", lambda request: said.append(f"request failed: {request.url}"))
    try:
        page.goto(f"{base_url}/zh/search.html?q={term}", wait_until="load")
        try:
            # Done when _finishSearch has written the status line. Not Search._pulse_status:
            # Sphinx's pulse timer fires once more after stopPulse() and restarts it (-1 + 1),
            # so -1 holds only until that tick, and a poll that missed it waited for ever.
            page.wait_for_function(
                "() => typeof Search !== 'undefined' && Search.status"
                " && Search.status.innerText.length > 0", timeout=60_000)
        except PlaywrightTimeout:
            state = page.evaluate(
                "() => typeof Search === 'undefined' ? 'Search undefined' : JSON.stringify({"
                "hasIndex: Search.hasIndex(), pulse: Search._pulse_status,"
                " status: Search.status && Search.status.innerText,"
                " results: document.querySelectorAll('#search-results li').length})")
            pytest.fail(f"the Chinese search for {term} did not finish in 60 s: {state}; "
                        f"the page said: {said or 'nothing'}")
        hrefs = page.locator("#search-results ul.search > li > a:first-of-type").evaluate_all(
            "links => links.map(a => a.href)")
    finally:
        page.close()
    found = sorted({h.split("#")[0].split("?")[0].removeprefix(f"{base_url}/zh/")
                    .removesuffix(".html") for h in hrefs})
    missing = sorted(set(expected) - set(found))
    assert not missing, (f"searching the Chinese edition for {term} lists {found}; these pages "
                         f"contain it but are not listed: {missing}")


def _translation(doc: str, english: str) -> str | None:
    """The Chinese catalogue's translation of an English message of page `doc`, if any."""
    from babel.messages.pofile import read_po

    path = ROOT / "locales" / "zh_CN" / "LC_MESSAGES" / f"{doc}.po"
    if not path.is_file():
        return None
    with path.open(encoding="utf-8") as handle:
        message = read_po(handle).get(english)
    return message.string if message and message.string and not message.fuzzy else None


def _html_texts(path: Path, pattern: str) -> list[str]:
    import html
    import re

    source = path.read_text(encoding="utf-8")
    return [" ".join(html.unescape(re.sub(r"<[^>]+>", "", m)).split()).removesuffix("#")
            .strip() for m in re.findall(pattern, source, re.S)]


def test_chinese_titles_and_captions_are_the_translated_ones():
    """Where the catalogue translates a page's title or a caption of the table of contents,
    the Chinese page shows the translation (Sphinx alone left the chapters' numbered titles
    and the captions English; book/_ext/editions.py fixes both)."""
    wrong = []
    for doc in PAGES:
        (english,) = _html_texts(SITE / f"{doc}.html", r"<h1>(.*?)</h1>")[:1]
        (chinese,) = _html_texts(SITE / "zh" / f"{doc}.html", r"<h1>(.*?)</h1>")[:1]
        expected = _translation(doc, english)
        if expected is not None and chinese != " ".join(expected.split()):
            wrong.append(f"{doc}: title {chinese!r}, translated {expected!r}")
    captions = r'class="caption"[^>]*><span class="caption-text">(.*?)</span>'
    english = _html_texts(SITE / f"{PAGES[0]}.html", captions)
    chinese = _html_texts(SITE / "zh" / f"{PAGES[0]}.html", captions)
    assert len(english) == len(chinese) > 0, (english, chinese)
    for en, zh in zip(english, chinese):
        expected = _translation(PAGES[0], en)
        if expected is not None and zh != expected:
            wrong.append(f"caption {zh!r}, translated {expected!r}")
    assert not wrong, "\n".join(wrong)
