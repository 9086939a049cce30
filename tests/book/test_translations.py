"""The Chinese edition cannot fall behind the English: its catalogues are current and complete.

The English pages and notebooks are the source; the Chinese text lives in one gettext
catalogue per page, ``locales/zh_CN/LC_MESSAGES/<page>.po``. This test regenerates the
message templates from the current sources (a gettext build of the book into a temporary
folder, the same as ``make gettext``) and compares every catalogue with its template:

- every page has a catalogue, and every catalogue has a page;
- every message of the template is in the catalogue, and the catalogue has no message the
  template lacks, nor obsolete ones (``#~``): *current* (``test_catalogues_match_the_sources``);
- every message is translated and none is fuzzy: *complete*
  (``test_catalogues_are_fully_translated``).

The comparison reads ids, contexts, translations and the fuzzy mark only, never the format
flags (``python-format``) that Babel sets on prose such as "9.1% of": ``make po``
(tools/update_translations.py) drops them, so that ``msgfmt --check`` accepts natural Chinese,
and a committed catalogue must carry none (``test_catalogues_carry_no_format_flags``, cheap).

So a change to an English paragraph fails here until its catalogue is updated (``make po``)
and the new message translated, in the same commit. The failure names each file and its
counts. Reading the catalogues with Babel (Sphinx's own dependency) rather than ``sphinx-intl
stat``, which always exits 0.

The gettext build needs the book's stack (Jupyter Book, MyST-NB), which requirements.txt
installs for ``make test``; the environment of ``make test-minimum`` has none of it, and the
build-based tests are skipped there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.update_translations import has_format_flags, strip_format_flags  # noqa: E402

LANGUAGE = "zh_CN"
CATALOGUES = ROOT / "locales" / LANGUAGE / "LC_MESSAGES"


# ------------------------------------------------------------------------ the comparison
@dataclass
class Report:
    """What is wrong with one page's catalogue."""

    name: str  # the page, e.g. notebooks/01_attention
    missing_catalogue: bool = False  # the page has no .po
    no_page: bool = False  # a .po for a page the book no longer has
    untranslated: list[str] = field(default_factory=list)
    fuzzy: list[str] = field(default_factory=list)
    not_in_catalogue: list[str] = field(default_factory=list)  # new English: run make po
    obsolete: list[str] = field(default_factory=list)  # #~ entries or ids no page has

    @property
    def stale(self) -> bool:
        return bool(self.missing_catalogue or self.no_page or self.not_in_catalogue
                    or self.obsolete)

    @property
    def incomplete(self) -> bool:
        return bool(self.untranslated or self.fuzzy)

    def line(self) -> str:
        if self.missing_catalogue:
            return (f"{self.name}.po: missing ({len(self.not_in_catalogue)} messages "
                    "untranslated): run `make po`, then translate it")
        if self.no_page:
            return (f"{self.name}.po: the book has no page {self.name} any more: delete the "
                    "catalogue (git rm)")
        counts = ", ".join(f"{len(ids)} {what}" for what, ids in [
            ("untranslated", self.untranslated), ("fuzzy", self.fuzzy),
            ("obsolete", self.obsolete), ("not in the catalogue", self.not_in_catalogue)])
        example = next(iter(self.not_in_catalogue or self.untranslated or self.fuzzy
                            or self.obsolete), "")
        return f"{self.name}.po: {counts}; e.g. {' '.join(example.split())[:90]!r}"


def _read(path: Path):
    from babel.messages.pofile import read_po

    with path.open(encoding="utf-8") as handle:
        return read_po(handle)


def _key(message) -> tuple:
    return (message.id, message.context)


def compare(templates: Path, catalogues: Path) -> list[Report]:
    """One report per page whose catalogue is not current and complete (none: all good)."""
    pots = {p.relative_to(templates).with_suffix("").as_posix(): p
            for p in templates.rglob("*.pot")}
    pos = {p.relative_to(catalogues).with_suffix("").as_posix(): p
           for p in catalogues.rglob("*.po")}
    reports = []
    for name in sorted(set(pots) | set(pos)):
        report = Report(name)
        template = {_key(m): m for m in _read(pots[name]) if m.id} if name in pots else {}
        if name not in pos:
            report.missing_catalogue = True
            report.not_in_catalogue = [m.id for m in template.values()]
        elif name not in pots:
            report.no_page = True
        else:
            catalogue = _read(pos[name])
            current = {_key(m): m for m in catalogue if m.id}
            report.not_in_catalogue = [m.id for k, m in template.items() if k not in current]
            report.obsolete = ([m.id for k, m in current.items() if k not in template]
                               + [m.id for m in catalogue.obsolete.values()])
            for key, message in current.items():
                if key not in template:
                    continue
                if message.fuzzy:
                    report.fuzzy.append(message.id)
                elif not (message.string if isinstance(message.string, str)
                          else all(message.string)):
                    report.untranslated.append(message.id)
        if report.stale or report.incomplete:
            reports.append(report)
    return reports


def summary(reports: list[Report]) -> str:
    return "\n".join(f"  {r.line()}" for r in reports)


# ------------------------------------------------------------------------ the gettext build
def gettext_build(out: Path) -> Path:
    """The message templates of the current sources (``make gettext``), in ``out``."""
    pytest.importorskip("jupyter_book", reason="the gettext build needs the book's stack "
                        "(requirements.txt); make test-minimum's environment has none")
    command = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()",
               "build", str(ROOT), "--builder", "custom", "--custom-builder", "gettext",
               "--path-output", str(out), "--warningiserror", "--keep-going", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=900)
    templates = out / "_build" / "gettext"
    if result.returncode != 0 or not templates.is_dir():
        pytest.fail(f"the gettext build failed (exit {result.returncode}):\n"
                    f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return templates


@pytest.fixture(scope="module")
def templates(tmp_path_factory) -> Path:
    return gettext_build(tmp_path_factory.mktemp("gettext"))


# ------------------------------------------------------------------------ the tests
def test_catalogues_match_the_sources(templates):
    """Every page has its catalogue, with exactly the messages of the current English."""
    stale = [r for r in compare(templates, CATALOGUES) if r.stale]
    assert not stale, (
        f"{len(stale)} catalogue(s) in locales/{LANGUAGE}/LC_MESSAGES/ do not match the English "
        "sources. Run `make po` (gettext build, then tools/update_translations.py), translate "
        "the new messages, delete the obsolete (#~) ones:\n" + summary(stale))


def test_catalogues_are_fully_translated(templates):
    """No message of the Chinese edition is untranslated (it would show English) or fuzzy."""
    reports = compare(templates, CATALOGUES)
    incomplete = [r for r in reports if r.incomplete or r.missing_catalogue]
    total = sum(len(r.untranslated) + len(r.fuzzy) for r in incomplete)
    assert not incomplete, (
        f"{total} message(s) of the Chinese edition are untranslated or fuzzy, in "
        f"{len(incomplete)} catalogue(s) of locales/{LANGUAGE}/LC_MESSAGES/ (translate each "
        "msgstr following the rules for translators; clear the fuzzy mark once checked):\n"
        + summary(incomplete))


def test_a_complete_copy_of_the_catalogues_passes(templates, tmp_path):
    """The check passes on catalogues that translate every message of today's templates (a
    translation here is the English with a mark), and fails again when one is left out."""
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    def write(name: str, skip: int | None = None):
        catalogue = Catalog(locale=LANGUAGE)
        for i, message in enumerate(m for m in _read(templates / f"{name}.pot") if m.id):
            catalogue.add(message.id, "" if i == skip else f"【译】{message.id}",
                          context=message.context)
        path = tmp_path / f"{name}.po"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            write_po(handle, catalogue)

    names = sorted(p.relative_to(templates).with_suffix("").as_posix()
                   for p in templates.rglob("*.pot"))
    assert "notebooks/01_attention" in names and "book/results" in names, names
    for name in names:
        write(name)
    assert compare(templates, tmp_path) == []
    write(names[0], skip=0)
    (report,) = compare(templates, tmp_path)
    assert (report.name, len(report.untranslated), report.stale) == (names[0], 1, False)


POT = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=utf-8\\n"

msgid "Kept"
msgstr ""

msgid "Untranslated"
msgstr ""

msgid "Fuzzy"
msgstr ""

msgid "New in the English"
msgstr ""
"""

PO = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=utf-8\\n"

msgid "Kept"
msgstr "保留"

msgid "Untranslated"
msgstr ""

#, fuzzy
msgid "Fuzzy"
msgstr "模糊"

msgid "Removed from the English"
msgstr "已删除"

#~ msgid "Long gone"
#~ msgstr "早已删除"
"""


def test_the_comparison_names_every_kind_of_problem(tmp_path):
    pot, po = tmp_path / "pot", tmp_path / "po"
    for folder, files in [(pot, {"book/page": POT, "book/new": POT}),
                          (po, {"book/page": PO, "book/gone": PO})]:
        for name, text in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            suffix = ".pot" if folder == pot else ".po"
            (folder / name).with_suffix(suffix).write_text(text, encoding="utf-8")
    gone, new, page = compare(pot, po)
    assert (gone.name, gone.no_page, gone.stale) == ("book/gone", True, True)
    assert (new.name, new.missing_catalogue, len(new.not_in_catalogue)) == ("book/new", True, 4)
    assert page.name == "book/page"
    assert page.untranslated == ["Untranslated"] and page.fuzzy == ["Fuzzy"]
    assert page.not_in_catalogue == ["New in the English"]
    assert sorted(page.obsolete) == ["Long gone", "Removed from the English"]
    assert page.line().startswith("book/page.po: 1 untranslated, 1 fuzzy, 2 obsolete, "
                                  "1 not in the catalogue")
    assert "book/gone.po: the book has no page" in summary([gone, new, page])


# ------------------------------------------------------------------------ format flags
FLAGGED = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=utf-8\\n"

#, python-format
msgid "It turns 9.1% of the test words into it, with a 10 % dropout."
msgstr "它把 9.1% 的测试词变成它，dropout 为 10 %。"

#, fuzzy, python-format
msgid "About 4.7% of the hours."
msgstr "约 4.7% 的小时。"

#, no-python-format, python-format
msgid "A 95% interval."
msgstr "95% 区间。"

#, python-brace-format, python-format
msgid "Says 70%, as in {cite}`muller2019when`."
msgstr "说 70%，见 {cite}`muller2019when`。"
"""


def test_format_flags_are_dropped_and_nothing_else():
    stripped = strip_format_flags(FLAGGED)
    assert "format" not in stripped.replace("Content-Type", "")
    assert "#, fuzzy\nmsgid \"About 4.7% of the hours.\"" in stripped
    assert stripped.count("#,") == 1
    assert [line for line in FLAGGED.splitlines() if not line.startswith("#,")] == \
        [line for line in stripped.splitlines() if not line.startswith("#,")]
    assert has_format_flags(FLAGGED) and not has_format_flags(stripped)
    assert strip_format_flags(stripped) == stripped


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="needs GNU gettext's msgfmt")
def test_msgfmt_check_accepts_natural_chinese_once_the_flags_are_dropped(tmp_path):
    """What the flags did: msgfmt --check fails on a natural translation of "9.1% of"."""
    path = tmp_path / "page.po"
    path.write_text(FLAGGED, encoding="utf-8")
    check = ["msgfmt", "--check", "-o", "/dev/null", str(path)]
    assert subprocess.run(check, capture_output=True).returncode != 0
    path.write_text(strip_format_flags(FLAGGED), encoding="utf-8")
    result = subprocess.run(check, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_comparison_does_not_depend_on_format_flags(tmp_path):
    """A catalogue is current and complete with or without the flags Babel would set."""
    pot, po = tmp_path / "pot", tmp_path / "po"
    template = "\n".join(
        'msgstr ""' if line.startswith('msgstr "') else line  # the .pot: no translations
        for line in FLAGGED.splitlines() if not line.startswith("#,"))
    for folder, text in [(pot, template), (po, FLAGGED.replace("#, fuzzy, ", "#, "))]:
        folder.mkdir()
        (folder / ("page.pot" if folder == pot else "page.po")).write_text(text,
                                                                           encoding="utf-8")
    assert compare(pot, po) == []
    (po / "page.po").write_text(strip_format_flags(FLAGGED.replace("#, fuzzy, ", "#, ")),
                                encoding="utf-8")
    assert compare(pot, po) == []


def test_catalogues_carry_no_format_flags():
    """``make po`` drops them; a catalogue updated by sphinx-intl alone still has them, and
    ``msgfmt --check`` then rejects a natural translation of "9.1% of"."""
    flagged = [str(p.relative_to(ROOT)) for p in sorted(CATALOGUES.rglob("*.po"))
               if has_format_flags(p.read_text(encoding="utf-8"))]
    assert not flagged, ("catalogues with python-format (or other format) flags: "
                         f"{flagged}; run `python tools/update_translations.py` (make po "
                         "does) to drop them")
