"""The two editions of the book (book/_ext/editions.py): where each is built and published,
the language switch's links, and the Chinese search's user dictionary.

The built sites are tested in a browser by tests/browser/test_site.py; these checks need no
build.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import editions  # noqa: E402

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
SPHINX = CONFIG["sphinx"]["config"]
DICTIONARY = ROOT / SPHINX["html_search_options"]["dict"]


@pytest.mark.parametrize("uri, here, there, url", [
    ("notebooks/01_attention.html", "en", "zh", "../zh/notebooks/01_attention.html"),
    ("notebooks/01_attention.html", "zh", "en", "../../notebooks/01_attention.html"),
    ("book/intro.html", "zh", "en", "../../book/intro.html"),
    ("search.html", "en", "zh", "zh/search.html"),
    ("search.html", "zh", "en", "../search.html"),
    ("genindex.html", "zh", "en", "../genindex.html"),
])
def test_switch_links_to_the_same_page_of_the_other_edition(uri, here, there, url):
    assert editions.switch_url(uri, here, there) == url
    # followed from the page's own folder, the link lands on the other edition's page
    page = Path("/site") / editions.EDITIONS[here]["folder"] / uri
    landed = (page.parent / url).resolve()
    assert landed == (Path("/site") / editions.EDITIONS[there]["folder"] / uri).resolve()


def test_editions_and_languages():
    assert editions.edition_key("zh_CN") == "zh" and editions.edition_key(None) == "en"
    assert editions.edition_key("en") == "en"
    assert editions.other_edition("zh") == "en"
    with pytest.raises(ValueError, match="no 'fr' edition"):
        editions.edition_key("fr")


def test_chinese_config_is_the_english_one_in_chinese():
    """The Chinese build's config is _config.yml with the language, title and author changed
    and the local extensions' folders made absolute (the file is written to _build/zh/)."""
    zh = editions.edition_config("zh")
    assert zh["sphinx"]["config"]["language"] == "zh_CN"
    assert zh["title"] != CONFIG["title"] and re.search("[\u4e00-\u9fff]", zh["title"])
    for name, folder in zh["sphinx"]["local_extensions"].items():
        assert Path(folder).is_absolute() and (Path(folder) / f"{name}.py").is_file(), folder
    stripped = {k: v for k, v in zh.items() if k not in ("title", "author", "sphinx")}
    assert stripped == {k: v for k, v in CONFIG.items() if k not in ("title", "author", "sphinx")}
    changed = editions.EDITIONS["zh"]["config"]["sphinx"]["config"]
    assert set(changed) == {"language", "nb_code_prompt_show", "nb_code_prompt_hide"}
    zh_sphinx = {k: v for k, v in zh["sphinx"]["config"].items() if k not in changed}
    assert zh_sphinx == SPHINX
    assert editions.edition_config("en") == {
        **CONFIG, "sphinx": {**CONFIG["sphinx"], "local_extensions": {
            name: str((ROOT / folder).resolve())
            for name, folder in CONFIG["sphinx"]["local_extensions"].items()}}}


def test_written_config_round_trips(tmp_path):
    out = tmp_path / "zh" / "_config.yml"
    assert editions.main(["config", "zh", str(out)]) == 0
    assert yaml.safe_load(out.read_text(encoding="utf-8")) == editions.edition_config("zh")
    assert editions.main(["config", "fr", str(out)]) == 2


def test_the_book_target_builds_and_publishes_both_editions():
    """`make book` (what the Pages workflow runs, publishing _build/html) builds the English
    edition into _build/html and copies the Chinese one into _build/html/zh."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^book: book-en book-zh$", makefile, re.M)
    zh = re.search(r"^book-zh:.*?\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert "editions.py config zh $(ZH_BUILD)/_config.yml" in zh
    assert "--config $(ZH_BUILD)/_config.yml" in zh and "$(JB_STRICT)" in zh
    assert "cp -r $(ZH_BUILD)/_build/html _build/html/zh" in zh
    assert "--warningiserror --nitpick" in makefile
    assert editions.EDITIONS["zh"]["folder"] == "zh/"


def test_the_language_switch_is_in_every_page_header():
    options = SPHINX["html_theme_options"]
    assert options["article_header_end"][0] == "language-switch.html"
    assert "article-header-buttons.html" in options["article_header_end"]
    assert (editions.TEMPLATES / "language-switch.html").is_file()
    assert CONFIG["sphinx"]["local_extensions"]["editions"] == "book/_ext"


# ------------------------------------------------------------------ Chinese search
def test_search_dictionary_is_one_chinese_term_per_line():
    """jieba reads every line as `word [frequency] [tag]`: no comments, no blank lines."""
    lines = DICTIONARY.read_text(encoding="utf-8").splitlines()
    assert lines, DICTIONARY
    bad = [line for line in lines if not re.fullmatch(r"[\u4e00-\u9fff][\u4e00-\u9fff-]*", line)]
    assert not bad, f"{DICTIONARY.name}: not a Chinese term: {bad}"
    assert len(lines) == len(set(lines)), "a term is listed twice"
    for term in ("多头注意力", "因果掩码", "缩放点积注意力", "位置编码", "层归一化", "标签平滑",
                 "束搜索", "困惑度", "残差连接", "前馈网络", "自注意力"):
        assert term in lines, term


def test_the_dictionary_makes_the_course_terms_single_words():
    jieba = pytest.importorskip("jieba")  # pinned in requirements.txt and -minimum.txt
    jieba.setLogLevel(logging.WARNING)
    sentence = "本章实现多头注意力，并用因果掩码训练解码器；标签平滑与束搜索见第 9 章。"
    plain = jieba.Tokenizer()
    assert "多头注意力" not in plain.cut_for_search(sentence)  # what the dictionary fixes
    course = jieba.Tokenizer()
    course.load_userdict(str(DICTIONARY))
    words = set(course.cut_for_search(sentence))
    assert {"多头注意力", "因果掩码", "标签平滑", "束搜索"} <= words, words
    assert "注意力" in words  # a search for the shorter term still finds the page


# ------------------------------------------------------------------ translated titles
def _build_chinese_site(src: Path, extensions: list[str], files: dict[str, str],
                        messages: dict[str, str], conf: str = ""):
    """Build a small Sphinx site in Chinese from `files` (name -> text), with one catalogue
    of `messages` (English -> Chinese) for its root page; returns the Sphinx app."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    (src / "locales" / "zh_CN" / "LC_MESSAGES").mkdir(parents=True)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        f"extensions = {extensions!r}\nlanguage = 'zh_CN'\nlocale_dirs = ['locales']\n"
        f"html_search_options = {{'dict': {str(DICTIONARY)!r}}}\n{conf}", encoding="utf-8")
    for name, text in files.items():
        (src / name).write_text(text, encoding="utf-8")
    catalogue = Catalog(locale="zh_CN")
    for english, chinese in messages.items():
        catalogue.add(english, chinese)
    with (src / "locales" / "zh_CN" / "LC_MESSAGES" / "index.po").open("wb") as handle:
        write_po(handle, catalogue)
    with docutils_namespace():
        app = Sphinx(str(src), str(src), str(src / "_build"), str(src / "_doctrees"), "html",
                     status=None, warning=None, freshenv=True, warningiserror=True)
        app.build()
    return app


def _translated_site(tmp_path: Path, with_editions: bool) -> str:
    """A one-page Sphinx site in Chinese whose title starts with its number, as every
    chapter's does; returns the built page."""
    src = tmp_path / ("with" if with_editions else "without")
    _build_chinese_site(
        src, ["myst_parser", *(["editions"] if with_editions else [])],
        {"index.md": "# 2. Multi-head attention\n\nHeads split the width.\n"},
        {"2. Multi-head attention": "2. 多头注意力",
         "Heads split the width.": "各个头把宽度切开。"})
    return (src / "_build" / "index.html").read_text(encoding="utf-8")


def test_a_translated_title_that_starts_with_its_number_is_used(tmp_path, monkeypatch):
    """Sphinx keeps a translation only if it parses as one paragraph; in Markdown (the
    notebooks, the pages) "2. ..." parses as a numbered list, so without the editions
    extension the title stays English."""
    pytest.importorskip("myst_parser", reason="the book's Markdown parser (requirements.txt)")
    from sphinx.transforms import i18n

    monkeypatch.setattr(i18n, "publish_msgstr",
                        getattr(i18n.publish_msgstr, "__wrapped__", i18n.publish_msgstr))
    without = _translated_site(tmp_path, with_editions=False)
    assert "<h1>2. Multi-head attention" in without and "各个头把宽度切开。" in without
    page = _translated_site(tmp_path, with_editions=True)
    assert "<h1>2. 多头注意力" in page and "各个头把宽度切开。" in page
    assert editions.escape_leading_number("2. 多头注意力") == "2\\. 多头注意力"
    assert editions.escape_leading_number("2.3 节") == "2.3 节"


def test_table_of_contents_captions_are_translated(tmp_path):
    """sphinx-external-toc (Jupyter Book's _toc.yml) inserts the toctrees after Sphinx has
    translated the page; the editions extension translates their captions afterwards."""
    pytest.importorskip("sphinx_external_toc", reason="Jupyter Book's toc (requirements.txt)")
    from sphinx import addnodes

    def build(extensions: list[str]) -> list[str]:
        app = _build_chinese_site(
            tmp_path / "-".join(extensions), extensions,
            {"_toc.yml": "format: jb-book\nroot: index\nparts:\n"
                         "  - caption: Foundations\n    chapters:\n      - file: one\n",
             "index.rst": "Home\n====\n", "one.rst": "One\n===\n"},
            {"Foundations": "基础", "Home": "首页"}, conf="external_toc_path = '_toc.yml'\n")
        doctree = app.env.get_doctree("index")
        return [t.get("caption") for t in doctree.findall(addnodes.toctree)]

    assert build(["sphinx_external_toc"]) == ["Foundations"]  # what Sphinx does alone
    assert build(["sphinx_external_toc", "editions"]) == ["基础"]


def test_chinese_search_indexes_the_same_words_with_a_set_of_latin_terms():
    """Sphinx's SearchChinese looks every word up in the list of all Latin words seen so far
    (quadratic); the editions extension makes it a set, with the same words indexed."""
    pytest.importorskip("jieba")
    from sphinx.search.zh import SearchChinese

    text = ["多头注意力用 nn.MultiheadAttention 实现，每个 head 的宽度是 d_k。",
            "因果掩码 causal mask；GPT 的 logits 经过 softmax。", "The heads are concatenated."]

    def words(latin_terms) -> list[str]:
        SearchChinese.latin_terms = latin_terms
        lang = SearchChinese({"dict": str(DICTIONARY)})
        return [lang.stem(w) for chunk in text for w in lang.split(chunk)
                if lang.word_filter(lang.stem(w))]

    original = SearchChinese.latin_terms
    try:
        assert words([]) == words(editions.TermSet())
        assert "多头注意力" in words(editions.TermSet())
    finally:
        SearchChinese.latin_terms = original


def test_the_gettext_build_picks_the_outputs_the_html_build_shows():
    """Of an output's text forms, the gettext build (the catalogues' templates) takes the one
    the HTML page shows: a displayed source listing (text/html and text/latex) is raw HTML to
    it, never a message, as MyST-NB's own gettext order (text/latex first) made it."""
    pytest.importorskip("myst_nb", reason="the book's notebook parser (requirements.txt)")
    from myst_nb.core.render import get_mime_priority

    overrides = [tuple(o) for o in SPHINX["nb_mime_priority_overrides"]]
    text = ["text/html", "text/markdown", "text/latex", "text/plain"]
    html = [m for m in get_mime_priority("html", overrides) if m in text]
    gettext = get_mime_priority("gettext", overrides)
    assert html == text and [m for m in gettext if m in text] == html
    default = [m for m in get_mime_priority("gettext", []) if m in text]
    assert default[0] == "text/latex"  # what the overrides change
