"""The book's two editions, English and Chinese, built from the same sources.

The English edition is the book as ``_config.yml`` describes it, in ``_build/html``. The
Chinese edition is the same book built with ``language: zh_CN``: Sphinx then reads the
translations of every page's prose from ``locales/zh_CN/LC_MESSAGES/<page>.po`` (gettext), and
the site goes to ``_build/html/zh/``, so one upload of ``_build/html`` (GitHub Pages) serves
both. ``make book`` builds both; ``make book-zh`` the Chinese one (see the Makefile).

As a script, this module writes the configuration of an edition (``_config.yml`` with the
edition's settings merged in)::

    python book/_ext/editions.py config zh _build/zh/_config.yml

As a Sphinx extension (``_config.yml``, ``sphinx.local_extensions``) it

- puts a link to the same page in the other edition into every page's header (the template
  ``templates/language-switch.html``, listed in ``article_header_end``). The link is relative
  (``../zh/notebooks/01_attention.html`` from ``notebooks/01_attention.html``), so it works on
  the served site and from ``file://`` alike; a click keeps the section (``#...``) you are in;
- keeps a translated title that starts with its number ("2. 多头注意力：...") a title: Sphinx
  parses every translation as a small document and keeps it only if it is one paragraph, and
  "2. " starts a numbered list, so every chapter's title stayed English (``_title_numbers``);
- translates the captions of the table of contents (Foundations, ...): Jupyter Book's
  sphinx-external-toc inserts the toctrees after Sphinx's translation has run, so their
  captions, which the gettext build puts into the root page's catalogue, stayed English
  (``TranslateTocCaptions``);
- in the Chinese edition, checks that Chinese search will work: Sphinx's Chinese search splits
  words with jieba and, without it, silently indexes no Chinese word at all; the user
  dictionary (``html_search_options: {dict: ...}``, the course's terms, so that 多头注意力 is
  one word) is resolved against the source folder and must exist; and it makes that search's
  indexing linear: Sphinx's Chinese splitter keeps every Latin word it meets in a list and
  looks each word up in it (quadratic in the size of the book), a set does the same.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
import sys
from pathlib import Path

from sphinx.transforms import SphinxTransform

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = Path(__file__).resolve().parent / "templates"

# key -> what differs between the editions. `folder`: where the edition's site lies inside
# _build/html (the English one at its root). `config`: merged into _config.yml for its build.
EDITIONS: dict[str, dict] = {
    "en": {"language": "en", "folder": "", "hreflang": "en", "label": "English",
           "title": "This page in English", "config": {}},
    "zh": {"language": "zh_CN", "folder": "zh/", "hreflang": "zh-CN", "label": "中文",
           "title": "本页的中文版",
           "config": {"title": "动手学注意力与 Transformer",
                      "author": "本课程作者",
                      "sphinx": {"config": {
                          "language": "zh_CN",
                          # myst-nb's toggles of folded code cells (not Sphinx messages)
                          "nb_code_prompt_show": "显示代码单元",
                          "nb_code_prompt_hide": "隐藏代码单元"}}}},
}


def edition_key(language: str | None) -> str:
    """``"zh"`` for Sphinx's ``language`` zh_CN, ``"en"`` for English (or none)."""
    key = (language or "en").replace("-", "_").split("_")[0].lower()
    if key not in EDITIONS:
        raise ValueError(f"the book has no {language!r} edition; editions: "
                         f"{[e['language'] for e in EDITIONS.values()]} (book/_ext/editions.py)")
    return key


def other_edition(key: str) -> str:
    (other,) = set(EDITIONS) - {key}
    return other


def switch_url(target_uri: str, from_key: str, to_key: str) -> str:
    """The relative URL, from page ``target_uri`` (``notebooks/01_attention.html``) of one
    edition, of the same page in the other edition."""
    depth = target_uri.count("/") + EDITIONS[from_key]["folder"].count("/")
    return "../" * depth + EDITIONS[to_key]["folder"] + target_uri


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def edition_config(key: str, config_path: Path = ROOT / "_config.yml") -> dict:
    """``_config.yml`` with the edition's settings merged in.

    Jupyter Book finds local extensions relative to the config file, so their folders are
    made absolute (the written file may lie anywhere); every other path in it is relative to
    the source folder, as in ``_config.yml``."""
    import yaml

    config_path = Path(config_path).resolve()
    config = _merge(yaml.safe_load(config_path.read_text(encoding="utf-8")),
                    EDITIONS[key]["config"])
    extensions = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in extensions.items():
        extensions[name] = str((config_path.parent / folder).resolve())
    return config


# ------------------------------------------------------------------------ the Sphinx side
class TermSet(set):
    """A set with a list's ``extend``: what ``SearchChinese.latin_terms`` is used for."""

    def extend(self, words) -> None:
        self.update(words)


def _fast_latin_terms() -> None:
    from sphinx.search import zh

    if not isinstance(zh.SearchChinese.latin_terms, TermSet):
        zh.SearchChinese.latin_terms = TermSet(zh.SearchChinese.latin_terms)


def _check_search(app, config) -> None:
    from sphinx.errors import ConfigError

    if edition_key(config.language) != "zh":
        return
    if importlib.util.find_spec("jieba") is None:
        raise ConfigError("the Chinese edition's search needs jieba (without it Sphinx indexes "
                          "no Chinese word): pip install -r requirements.txt (jieba==0.42.1)")
    options = dict(config.html_search_options or {})
    if "dict" not in options:
        raise ConfigError("html_search_options has no 'dict': the Chinese search needs the "
                          "course's user dictionary (book/zh_dict.txt) so that terms such as "
                          "多头注意力 are single words")
    path = Path(app.srcdir) / options["dict"]
    if not path.is_file():
        raise ConfigError(f"html_search_options: the user dictionary {path} does not exist")
    options["dict"] = str(path)  # jieba opens it relative to the current folder otherwise
    config.html_search_options = options
    _fast_latin_terms()


# "2. " or "2) " at the start of a translated message: a list marker to the parser.
_LEADING_NUMBER = re.compile(r"^(\d+)([.)])(?=\s)")


def escape_leading_number(msgstr: str) -> str:
    """``2. 多头注意力`` -> ``2\\. 多头注意力``: the same text, read as a paragraph (the escape
    is valid in Markdown and reStructuredText alike). A message never starts with a list
    marker of its own: a list item's number is not part of its message."""
    return _LEADING_NUMBER.sub(r"\1\\\2", msgstr, count=1)


def _title_numbers() -> None:
    """Wrap Sphinx's parser of translated messages so that a leading number stays text."""
    from sphinx.transforms import i18n

    if getattr(i18n.publish_msgstr, "_course_escapes_numbers", False):
        return
    publish = i18n.publish_msgstr

    @functools.wraps(publish)
    def publish_msgstr(app, source, *args, **kwargs):
        return publish(app, escape_leading_number(source), *args, **kwargs)

    publish_msgstr._course_escapes_numbers = True
    i18n.publish_msgstr = publish_msgstr


class TranslateTocCaptions(SphinxTransform):
    """Translate the toctrees that sphinx-external-toc inserts (its ``InsertToctrees`` runs
    at priority 100, after Sphinx's ``Locale`` at 20), from the page's own catalogue."""

    default_priority = 101  # after InsertToctrees, before the toctree collector reads them

    def apply(self, **kwargs) -> None:
        from sphinx import addnodes
        from sphinx.locale import init as init_locale
        from sphinx.util.i18n import docname_to_domain

        if edition_key(self.config.language) == "en":
            return
        toctrees = list(self.document.findall(addnodes.toctree))
        if not toctrees:
            return
        domain = docname_to_domain(self.env.docname, self.config.gettext_compact)
        dirs = [str(Path(self.env.srcdir) / d) for d in self.config.locale_dirs]
        catalog, has_catalog = init_locale(dirs, self.config.language, domain)
        if not has_catalog:
            return
        for toctree in toctrees:
            for message in toctree.extract_original_messages():
                translated = catalog.gettext(message)
                if translated and translated != message:
                    toctree.apply_translated_message(message, translated)


def _add_templates(app, config) -> None:
    if str(TEMPLATES) not in config.templates_path:
        config.templates_path = [*config.templates_path, str(TEMPLATES)]


def _language_switch(app, pagename, templatename, context, doctree) -> None:
    if app.builder.format != "html":
        return
    here = edition_key(app.config.language)
    there = other_edition(here)
    context["course_language_switch"] = {
        "url": switch_url(app.builder.get_target_uri(pagename), here, there),
        "label": EDITIONS[there]["label"], "title": EDITIONS[there]["title"],
        "hreflang": EDITIONS[there]["hreflang"],
    }


def setup(app):
    _title_numbers()
    app.connect("config-inited", _add_templates)
    app.connect("config-inited", _check_search)
    app.connect("html-page-context", _language_switch)
    app.add_transform(TranslateTocCaptions)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}


# ------------------------------------------------------------------------ the script
def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "config" or argv[1] not in EDITIONS:
        print(f"usage: python book/_ext/editions.py config {{{','.join(EDITIONS)}}} OUT.yml",
              file=sys.stderr)
        return 2
    import yaml

    out = Path(argv[2])
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (f"# Generated by book/_ext/editions.py from _config.yml for the {argv[1]} "
              "edition; do not edit.\n")
    out.write_text(header + yaml.safe_dump(edition_config(argv[1]), allow_unicode=True,
                                           sort_keys=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
