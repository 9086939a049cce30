"""Every measured number quoted in a chapter's prose is printed by the same notebook.

A re-run changes outputs but not markdown, so a sentence can keep an old number. This test
reads each committed notebook (JSON only, nothing runs) and checks that every number a
markdown cell quotes can be found in the notebook: in an output of a code cell (stdout
stream, ``text/plain``, ``text/html``, ``text/markdown``) or in a code cell's source (the
settings: a learning rate, a dropout, a threshold).

Which numbers are checked (``quoted_numbers``). The ones a measurement produces:
- numbers with a decimal point: ``0.41``, ``1,234.5``, ``2.5e-3`` (``1e-3`` too);
- percentages: ``4.7%``, ``30 %``;
- factors: ``3x``, ``2.5×``, and written before the number, ``×3``, ``×1.82``, ``x1.82``
  (speed-ups, ratios; an ``x`` before an integer is a name, as in x86, and is not checked);
- integers with a thousands separator: ``8,744`` (data sizes, counts);
- numbers with a multiplier: ``1.04 M``, ``29k``, ``1.5 million``.
Not checked: other integers (section numbers, years, counts such as "72 hours" or "4 heads",
list numbering), a decimal that names a section, figure, table, exercise or chapter ("section
5.4"), version numbers (``2.13.0``, "Python 3.11"), and anything in inline code, code
blocks, HTML tags, link targets or citations. Math (``$...$``) *is* checked: a formula
holds few decimals, and those it holds are settings or results the code computes too; the
few that are exact arithmetic of the text go into the allowlist with their reason.

When does a quoted number match (``matches``)? When it is a correct rounding of a number
found in the notebook: with ``d`` decimals quoted, ``|found - quoted| <= 0.5 * 10**-d``
(a quoted ``0.41`` matches a printed ``0.4126`` and ``0.405``, not ``0.42`` or ``0.4``).
Thousands separators and underscores are ignored, the sign is ignored (prose says "fell by
0.02" where code prints ``-0.02``), a percentage also matches the fraction (``4.7%`` matches
``0.047``), a multiplier also matches the whole number (``1.04 M`` matches ``1041280``), a
number in scientific notation is rounded at its mantissa's last digit, and a round number
with a thousands separator at its last non-zero digit ("about 30,000" matches ``30,401``).

A number that truly belongs only to the prose (a fact cited from a paper, exact arithmetic
spelled out in the text) goes into ``ALLOWED`` below with its reason. A measured number that
is stale is never allowlisted: make a cell print it, or remove it from the prose.

The translations (``locales/<language>/LC_MESSAGES/**/*.po``) quote the same numbers: in
every translated message, the numbers of the translation (``msgstr``) are those of the
English (``msgid``), as a multiset and as written (``message_numbers``: digits, thousands
separators, decimals, exponent, and a ``%`` or ``x`` that follows), so a number checked in
the English prose is the one the Chinese reader sees. Counting words may differ ("two
approaches", 两种方法); a number written in digits may not. Two Chinese ways of writing a
number are read for their value (``number_differences``): a factor with 倍, "3.5 倍" for
"3.5x", "3.5×" or "3.5 times" (the same digits), and a large number with 万, 亿 or 万亿,
"260 亿" for "2.6e10", "26,000,000,000" or "26 billion" (the same value, exactly: "26 亿" or
"约 260 亿" for 26,312,000,000 is a different number).
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("*.ipynb")
                   if not p.name.startswith("."))  # not the runner's .NN.running copies

# notebook stem -> {quoted text as written: reason}. Only numbers that no run measures.
ALLOWED: dict[str, dict[str, str]] = {
    "06_tabular": {
        "1,500": "an example value of two columns (square feet), to show that one number "
                 "means different things in different columns; not a result",
    },
    "09_translation": {
        "70%": "explains what calibration means (says 70%, is right 70% of the time); "
               "not a result",
    },
    "12_finetuning": {
        "88.85 %": "Raschka's logistic regression on IMDB (LLMs-from-scratch, ch06 bonus), cited",
        "91.88 %": "Raschka's fine-tuned GPT-2 on IMDB (LLMs-from-scratch, ch06 bonus), cited",
        "124 M": "GPT-2's parameter count, cited with Raschka's result",
        "35,000": "the training split of Raschka's IMDB experiment, cited",
        "10,000": "the test split of Raschka's IMDB experiment, cited",
        "50,000": "all IMDB reviews, from which Raschka's splits are drawn, cited",
        "110 M": "BERT-base's parameter count (Devlin et al. 2019), cited",
    },
    "11_mixed_precision": {
        "65,504": "the largest float16 number, a property of the format (IEEE 754); the "
                  "notebook prints it only rounded",
    },
}

# ----------------------------------------------------------------------- finding numbers
_SEP_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # 1,234 or 1,234.5
_PLAIN_NUMBER = r"\d+(?:\.\d+)?(?:[eE][-+\u2212]?\d+)?"  # 12, 0.41, 2.5e-3
_NUMBER = re.compile(
    # a factor written first: x1.82 (a decimal: x86 and x1 are names), ×3 (not 0x1F, 2x2,
    # "72 ×12"); else a number not inside a word, a version, a path or a superscript
    r"(?:(?<![\w.,/^])(?<!\d\s)(?P<pre>x(?=\d+\.\d)|\u00d7(?=\d))|(?<![\w.,/^]))"
    rf"(?P<num>{_SEP_NUMBER}|{_PLAIN_NUMBER})"
    r"(?P<unit>\s?%|[x\u00d7](?![\w])(?!\s*\d)"  # 30%, 30 %, 3x, 2.5× (not 72 × 12)
    r"|\s?(?:[kKMB]|thousand|million|billion)(?![\w])|)"  # 1.04 M, 29k, 1.5 million
    r"(?![\w]|\.\d)"  # not followed by letters or another .digit (2.13.0)
)
# A decimal that names a place in the book: "section 5.4", "Figure 2.1", "exercise 3.2".
_PLACE = re.compile(r"(?:sections?|§|chapters?|figures?|fig\.|tables?|exercises?|eqs?\.|"
                    r"equations?|appendix|parts?|lines?|cells?|python|torch|pytorch|"
                    r"versions?)\s*$", re.IGNORECASE)
_STRIP = [
    re.compile(r"```.*?```", re.S),  # fenced code
    re.compile(r"~~~.*?~~~", re.S),
    re.compile(r"\{[\w:-]+\}`[^`]*`"),  # MyST roles: {cite}`...`, {doc}`...`
    re.compile(r"`[^`\n]*`"),  # inline code
    re.compile(r"<!--.*?-->", re.S),  # HTML comments
    re.compile(r"<[^>\n]+>"),  # HTML tags (their text stays)
    re.compile(r"\]\([^)\s]*\)"),  # link targets: [text](url) keeps the text
    re.compile(r"https?://\S+"),
]
_HEADING_NUMBER = re.compile(r"^(#+\s*)[\d.]+", re.M)  # "## 5.4 Three forecasters"
_LIST_NUMBER = re.compile(r"^(\s*)\d+[.)]\s", re.M)  # "1. item"


def prose_text(markdown: str) -> str:
    """The markdown with code, roles, tags, link targets and heading numbers blanked out.

    Blanked parts are replaced by spaces of the same length, so positions still point into
    the original text (the report quotes the sentence around a number).
    """
    def blank(match: re.Match) -> str:
        return re.sub(r"[^\n]", " ", match.group())

    text = markdown
    for pattern in _STRIP:
        text = pattern.sub(blank, text)
    text = _HEADING_NUMBER.sub(lambda m: m.group(1) + " " * (len(m.group()) - len(m.group(1))),
                               text)
    text = _LIST_NUMBER.sub(lambda m: m.group(1) + " " * (len(m.group()) - len(m.group(1))),
                            text)
    return text


def quoted_numbers(markdown: str) -> list[tuple[str, int]]:
    """``(number as written, position)`` for every checked number in a markdown cell."""
    text = prose_text(markdown)
    found = []
    for m in _NUMBER.finditer(text):
        num, unit = m.group("num"), m.group("unit").strip() or (m.group("pre") or "")
        checked = bool(unit) or "." in num or "," in num or "e" in num.lower()
        if not checked:
            continue
        if unit == "" and "." in num and _PLACE.search(text[max(0, m.start() - 12):m.start()]):
            continue
        found.append((m.group().strip(), m.start()))
    return found


# A comma belongs to a number only between digits: "8,744" and "(1,2)", never the comma that
# ends it ("8744, 0.5", "in 2014, the").
_ANY_NUMBER = re.compile(r"\d(?:[\d_]|,(?=\d))*(?:\.\d+)?(?:[eE][-+]?\d+)?"
                         r"|\.\d+(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> set[Decimal]:
    """Every number in an output or a code source, as an exact decimal (sign dropped)."""
    values = set()
    text = text.replace("\u2212", "-")
    for m in _ANY_NUMBER.finditer(text):
        raw = m.group().replace(",", "").replace("_", "").rstrip("_")
        try:
            values.add(abs(Decimal(raw)))
        except ArithmeticError:
            continue
        if "," in m.group():  # "1,2" in a list or a tuple: the parts count too
            for part in m.group().split(","):
                if part:
                    try:
                        values.add(abs(Decimal(part.replace("_", ""))))
                    except ArithmeticError:
                        pass
    return values


_MULTIPLIERS = {"k": 3, "K": 3, "thousand": 3, "M": 6, "million": 6, "B": 9, "billion": 9}


def parse_quoted(quoted: str) -> tuple[Decimal, Decimal, str]:
    """``(value, half a unit of its last digit, unit)`` of a quoted number.

    ``unit`` is ``"%"``, ``"x"`` (a factor, written before or after the number), a
    multiplier such as ``"M"`` (the value is then in millions) or ``""``.
    """
    match = re.match(r"([x\u00d7])?(.*?\d)\s?(%|[x\u00d7]|[kKMB]|thousand|million|billion)?$",
                     quoted)
    num, unit = match.group(2), match.group(3) or match.group(1) or ""
    unit = "x" if unit == "\u00d7" else unit
    num = num.replace(",", "").replace("\u2212", "-")
    mantissa, _, exponent = num.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    scale = int(exponent) if exponent else 0
    if "," in quoted and "." not in mantissa:  # "about 30,000": rounded to its last non-zero
        decimals = -(len(mantissa) - len(mantissa.rstrip("0")))
    half = Decimal(5) * Decimal(10) ** (scale - decimals - 1)
    return abs(Decimal(num)), half, unit


def matches(quoted: str, found: set[Decimal]) -> bool:
    """True when some number in `found` rounds to `quoted` at its precision."""
    value, half, unit = parse_quoted(quoted)
    scales = [Decimal(1)]  # 4.7% also matches 0.047, 1.04 M also matches 1041280
    if unit == "%":
        scales.append(Decimal("0.01"))
    elif unit in _MULTIPLIERS:
        scales.append(Decimal(10) ** _MULTIPLIERS[unit])
    return any(abs(number - value * scale) <= half * scale
               for number in found for scale in scales)


# ----------------------------------------------------------------------- reading a notebook
def notebook_numbers(nb: dict) -> set[Decimal]:
    """Every number printed by a code cell or written in a code cell's source."""
    found: set[Decimal] = set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        found |= numbers_in(_text(cell["source"]))
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                if out.get("name") == "stdout":  # stderr holds progress bars, not results
                    found |= numbers_in(_text(out.get("text", "")))
            elif out.get("output_type") in ("execute_result", "display_data"):
                data = out.get("data", {})
                for mime in ("text/plain", "text/markdown"):
                    if mime in data:
                        found |= numbers_in(_text(data[mime]))
                if "text/html" in data:
                    found |= numbers_in(html.unescape(re.sub(r"<[^>]+>", " ",
                                                             _text(data["text/html"]))))
    return found


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _sentence(markdown: str, position: int) -> str:
    start = max(markdown.rfind(". ", 0, position), markdown.rfind("\n\n", 0, position)) + 1
    end = min((i for i in (markdown.find(". ", position), markdown.find("\n\n", position))
               if i >= 0), default=len(markdown))
    return " ".join(markdown[start:end + 1].split())


_SECTION_HEADING = re.compile(r"^#+\s*(\d+(?:\.\d+)+)\.?\s", re.M)


def section_numbers(nb: dict) -> set[str]:
    """The numbers of the notebook's own section headings ("## 5.7 What ..." gives "5.7").

    The prose refers to its sections by number alone ("the table of 5.7"), so a quoted
    number that is one of them is read as a reference, not as a result.
    """
    return {m.group(1) for cell in nb["cells"] if cell["cell_type"] == "markdown"
            for m in _SECTION_HEADING.finditer(_text(cell["source"]))}


def violations(nb: dict, allowed: dict[str, str] | None = None) -> list[dict]:
    """Quoted numbers that match nothing in the notebook and are not allowlisted."""
    allowed = allowed or {}
    found = notebook_numbers(nb)
    sections = section_numbers(nb)
    out = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = _text(cell["source"])
        for quoted, position in quoted_numbers(source):
            if quoted in allowed or quoted in sections or matches(quoted, found):
                continue
            out.append({"cell": index, "number": quoted,
                        "sentence": _sentence(source, position)})
    return out


# ----------------------------------------------------------------------- the translations
# A number as written: digits with thousands separators, decimals, an exponent, and the
# percent sign (with the space before it, if any) or a factor's x that follows it. A comma
# counts only as a thousands separator (followed by three digits), never the comma after a
# number ("in 2014, the" and "2014 年，" both quote 2014).
_MESSAGE_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+\u2212]?\d+)?"
                             r"(?: ?%|[x\u00d7](?![A-Za-z0-9_]))?")
CATALOGUES = sorted((ROOT / "locales").glob("*/LC_MESSAGES/**/*.po"))


def message_numbers(text: str) -> Counter:
    """The numbers of a catalogue message as written, with their multiplicity."""
    return Counter(m.group() for m in _MESSAGE_NUMBER.finditer(text))


# What may follow a number and scale it: in English a multiplier word or letter ("26
# billion", "1.5 million", "29k", "1.04 M"), in Chinese a factor (倍) or a large unit (万, 亿).
_ENGLISH_SCALE = re.compile(r" ?(thousand|million|billion|trillion|[kKMB])(?![A-Za-z0-9_])")
_CHINESE_UNIT = re.compile(r" ?(倍|万亿|亿|万)")
_SCALE_EXPONENT = {"k": 3, "K": 3, "thousand": 3, "M": 6, "million": 6, "B": 9, "billion": 9,
                   "trillion": 12, "万": 4, "亿": 8, "万亿": 12}
_FACTOR = "倍"


def number_value(written: str, scale: str = "") -> Decimal | None:
    """The value of a number as written (separators dropped, exponent applied), times its
    scale ("亿": 1e8, "million": 1e6, ""), or None for a percentage or a factor ("4.7%",
    "3x")."""
    if written.endswith(("%", "x", "\u00d7")):
        return None
    value = Decimal(written.replace(",", "").replace("\u2212", "-"))
    return value * Decimal(10) ** _SCALE_EXPONENT.get(scale, 0)


def _scaled_numbers(text: str, scales: re.Pattern) -> list[tuple[str, str]]:
    """``(number as written, the scale that follows it or "")`` for each number of ``text``."""
    out = []
    for m in _MESSAGE_NUMBER.finditer(text):
        after = scales.match(text, m.end()) if m.group()[-1].isdigit() else None
        out.append((m.group(), after.group(1) if after else ""))
    return out


def number_differences(english: str, translated: str) -> tuple[list[str], list[str]]:
    """``(missing, extra)``: the numbers of ``english`` that ``translated`` does not quote,
    and those it quotes that ``english`` lacks; both empty when the numbers agree.

    A number agrees when it is written the same (a multiset, as ``message_numbers``), and
    also in two Chinese forms: a factor ``3.5 倍`` for ``3.5x``, ``3.5×`` or ``3.5`` ("3.5
    times": the same digits), and a number with 万, 亿 or 万亿 for an English number of the
    same value (``260 亿`` for ``2.6e10``, ``26,000,000,000`` or ``26 billion``). A number
    with 万 or 亿 never matches by its digits alone: ``260 亿`` is not ``260``.
    """
    english_left = _scaled_numbers(english, _ENGLISH_SCALE)
    chinese_left = _scaled_numbers(translated, _CHINESE_UNIT)

    def pair(accepts) -> None:
        for chinese in list(chinese_left):
            match = next((e for e in english_left if accepts(e, chinese)), None)
            if match is not None:
                english_left.remove(match)
                chinese_left.remove(chinese)

    # as written: a plain number first, then one with 倍 ("3 times", 3 倍)
    pair(lambda e, c: c[1] == "" and e[0] == c[0])
    pair(lambda e, c: c[1] == _FACTOR and e[0] == c[0])
    # a factor: 3.5x or 3.5× is 3.5 倍
    pair(lambda e, c: c[1] == _FACTOR and e[0] in (c[0] + "x", c[0] + "\u00d7"))
    # a large number by value: 2.6e10, 26,000,000,000 and 26 billion are 260 亿
    pair(lambda e, c: c[1] not in ("", _FACTOR)
         and number_value(*e) is not None and number_value(*e) == number_value(*c))
    missing = sorted(written for written, _ in english_left)
    extra = sorted(written + (" " + unit if unit else "") for written, unit in chinese_left)
    return missing, extra


def translation_mismatches(catalogue) -> list[dict]:
    """Translated messages of a babel catalogue whose numbers differ from the English."""
    out = []
    for message in catalogue:
        if not message.id or not message.string or isinstance(message.id, tuple):
            continue
        missing, extra = number_differences(message.id, message.string)
        if missing or extra:
            out.append({"msgid": message.id, "lineno": message.lineno,
                        "missing": missing, "extra": extra})
    return out


def _read_po(path: Path):
    from babel.messages.pofile import read_po

    with path.open(encoding="utf-8") as handle:
        return read_po(handle)


# ----------------------------------------------------------------------- the tests
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_quoted_number_is_printed(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    bad = violations(nb, ALLOWED.get(path.stem, {}))
    assert not bad, (
        f"{path.name}: {len(bad)} number(s) in the prose appear in no output and no code "
        "cell of the notebook (stale after a re-run, or never printed). Make a cell print "
        "them, or, for a number no run measures (a paper's result), add it to ALLOWED in "
        "tests/book/test_prose_numbers.py with its reason:\n"
        + "\n".join(f"  cell {v['cell']}: {v['number']!r} in: {v['sentence']}" for v in bad))


def test_allowlist_entries_are_still_used():
    """An allowlisted number that the prose no longer quotes is removed from ALLOWED."""
    stale = []
    for stem, entries in ALLOWED.items():
        path = ROOT / "notebooks" / f"{stem}.ipynb"
        assert path.is_file(), f"ALLOWED names {stem}, which is not a notebook"
        nb = json.loads(path.read_text(encoding="utf-8"))
        quoted = {q for cell in nb["cells"] if cell["cell_type"] == "markdown"
                  for q, _ in quoted_numbers(_text(cell["source"]))}
        stale += [f"{stem}: {q!r}" for q in entries if q not in quoted]
        assert all(reason.strip() for reason in entries.values()), f"{stem}: give a reason"
    assert not stale, f"allowlisted but no longer in the prose: {stale}"


def _notebook(markdown: str, *, stdout: str = "", source: str = "", html_out: str = "",
              stderr: str = "") -> dict:
    """A minimal notebook: one code cell with the given outputs, one markdown cell."""
    outputs = []
    if stdout:
        outputs.append({"output_type": "stream", "name": "stdout", "text": stdout})
    if stderr:
        outputs.append({"output_type": "stream", "name": "stderr", "text": stderr})
    if html_out:
        outputs.append({"output_type": "display_data", "metadata": {},
                        "data": {"text/html": html_out, "text/plain": "<table>"}})
    return {"cells": [
        {"cell_type": "code", "source": source, "outputs": outputs, "metadata": {},
         "execution_count": 1},
        {"cell_type": "markdown", "source": markdown, "metadata": {}},
    ]}


def test_stale_number_is_caught_and_rounded_one_accepted():
    printed = "test MAE: 0.4126 (ridge 0.8386)\n"
    assert violations(_notebook("The model reaches 0.41, ridge 0.84.", stdout=printed)) == []
    stale = violations(_notebook("The model reaches 0.43, ridge 0.84.", stdout=printed))
    assert [(v["cell"], v["number"]) for v in stale] == [(1, "0.43")]
    assert "reaches 0.43" in stale[0]["sentence"]
    # More decimals than printed is not a rounding of the printed number.
    assert [v["number"] for v in violations(_notebook("MAE 0.413.", stdout="MAE 0.41"))] == \
        ["0.413"]
    # Rounding is to the quoted precision, both ways of a tie accepted.
    assert violations(_notebook("about 0.4 and 0.42", stdout="0.405 0.4151")) == []
    assert [v["number"] for v in violations(_notebook("about 0.4", stdout="0.46"))] == ["0.4"]


@pytest.mark.parametrize("quoted, printed, ok", [
    ("1,234.5", "1234.46", True),
    ("8,744 windows", "n=8744", True),
    ("8,744 windows", "n=8745", False),
    ("4.7%", "share 0.0471", True),  # a percentage matches the fraction
    ("4.7%", "share 4.66%", True),
    ("4.7 %", "share 0.049", False),
    ("3x faster", "speed-up 2.96", True),
    ("2.5\u00d7 faster", "speed-up 2.46", True),
    ("3x faster", "speed-up 3.6", False),
    ("x1.82 faster", "speed-up 1.8249", True),  # a factor written before the number
    ("x1.82 faster", "speed-up 1.79", False),
    ("\u00d71.82 faster", "speed-up 1.79", False),
    ("1.82\u00d7 faster", "speed-up 1.79", False),
    ("\u00d73 faster", "speed-up 2.96", True),
    ("\u00d73 faster", "speed-up 3.6", False),
    ("a gap of \u22120.02", "gap -0.0213", True),  # the sign is not compared
    ("1.04 M parameters", "params 1041280", True),
    ("1.04 M parameters", "params 1.04", True),
    ("1.04 M parameters", "params 1051280", False),
    ("about 30,000 parameters", "30,401", True),
    ("29k sentences", "29000", True),
    ("lr 2e-3", "", True),  # found in the source below
    ("lr 3e-3", "", False),
])
def test_matching_rules(quoted, printed, ok):
    nb = _notebook(f"We see {quoted} here.", stdout=printed, source="lr = 2e-3\n")
    assert (violations(nb) == []) is ok


def test_a_comma_after_a_number_is_not_part_of_it():
    assert [m.group() for m in _ANY_NUMBER.finditer("(8744, 0.5), 2014, 8,744,")] == \
        ["8744", "0.5", "2014", "8,744"]
    assert numbers_in("(8744, 0.5), 1,2,") == {Decimal(8744), Decimal("0.5"), Decimal(12),
                                               Decimal(1), Decimal(2)}
    assert [m.group() for m in _MESSAGE_NUMBER.finditer("in 2014, 8,744, 0.41, 95 %,")] == \
        ["2014", "8,744", "0.41", "95 %"]


def test_where_numbers_are_found():
    table = "<table><tr><td>0.7918</td><td>1,068.6</td></tr></table>"
    assert violations(_notebook("0.792 and 1,069 and 1,068.6", html_out=table)) == []
    assert violations(_notebook("dropout 0.1 and lr 0.002", source="dropout=0.1, lr=2e-3")) \
        == []
    # Progress bars on stderr are not results.
    assert [v["number"] for v in violations(_notebook("7.5 it/s", stderr="7.5it/s"))] == ["7.5"]


@pytest.mark.parametrize("text", [
    "## 5.4 Three forecasters",
    "as in section 5.4 and sections 2.1",
    "1. first\n2. second",
    "Beijing from 2010 to 2014, 72 hours, 4 heads",
    "built with torch 2.13.0 on Python 3.11",
    "see `lr = 0.001` and {cite}`vaswani2017attention`",
    "[the docs](https://example.org/v2.0/page.html)",
    "float32 and bf16, GPT-2, d_k, W_2",
    "on x86 and x64 chips, inputs x1 and x2",  # an x before an integer is a name
    "address 0x1F, a 2x2 grid, a 3\u00d73 kernel, 72 \u00d712",
])
def test_ignored_numbers(text):
    assert quoted_numbers(text) == []


@pytest.mark.parametrize("text, expected", [
    ("MAE 0.792 \u00b0C against 0.795", ["0.792", "0.795"]),
    ("missing for 4.7% of the hours, 30 % of rows", ["4.7%", "30 %"]),
    ("about 3x faster, 2.5\u00d7 slower", ["3x", "2.5\u00d7"]),
    ("(x1.51, then x1.21), \u00d71.82 and 1.82\u00d7, \u00d73 the memory",
     ["x1.51", "x1.21", "\u00d71.82", "1.82\u00d7", "\u00d73"]),
    ("8,744 windows of 26,232", ["8,744", "26,232"]),
    ("the floor $8/9 \\approx 0.889$", ["0.889"]),
    ("rates 1e-3 and 2e-3", ["1e-3", "2e-3"]),
    ("1.04 M parameters, 29k pairs", ["1.04 M", "29k"]),
])
def test_checked_numbers(text, expected):
    assert [q for q, _ in quoted_numbers(text)] == expected


# ----------------------------------------------------------------------- the translations
@pytest.mark.parametrize("path", CATALOGUES,
                         ids=[str(p.relative_to(ROOT / "locales")) for p in CATALOGUES])
def test_translations_quote_the_numbers_of_the_english(path):
    bad = translation_mismatches(_read_po(path))
    assert not bad, (
        f"{path.relative_to(ROOT)}: {len(bad)} translated message(s) whose numbers differ "
        "from the English (write each number exactly as the msgid does: same digits, "
        "separators, decimals, % and x):\n"
        + "\n".join(f"  line {b['lineno']}: missing {b['missing']}, extra {b['extra']} in: "
                    f"{' '.join(b['msgid'].split())[:100]}" for b in bad))


def test_there_are_catalogues_to_check():
    assert any("zh_CN" in p.parts for p in CATALOGUES), "no locales/zh_CN catalogue found"


@pytest.mark.parametrize("english, translated, ok", [
    ("MAE 0.792 against 0.795", "MAE 为 0.792，对比 0.795", True),
    ("MAE 0.792 against 0.795", "MAE 为 0.79，对比 0.795", False),  # rounded
    ("8,744 windows", "8744 个窗口", False),  # separator dropped
    ("8,744 windows", "8,744 个窗口", True),
    ("about 1.81x faster", "快约 1.81x", True),
    ("about 1.81x faster", "快约 1.81 倍", True),  # 倍 is the factor's x
    ("about 1.81x faster", "快约 1.8 倍", False),  # ... with the same digits
    ("2.6e10 FLOPs", "260 亿次浮点运算", True),  # 亿 by value
    ("2.6e10 FLOPs", "26 亿次浮点运算", False),
    ("a 95 % interval", "95% 区间", False),
    ("a 95 % interval", "95 % 区间", True),
    ("lr 1e-3 in 2014,", "2014 年学习率 1e-3，", True),
    ("chapter 7 and `d_k = 64`", "第 7 章和 `d_k = 64`", True),
    ("chapter 7", "第七章", False),  # a number in digits stays in digits
    ("two approaches", "两种方法", True),
    ("the 5-gram and 3-grams", "5 元语法模型和 3 元组", True),
    ("0.41 and 0.41", "0.41", False),  # a multiset: both occurrences
    ("in 2014, 8,744 windows, 0.41,", "2014 年，8,744 个窗口，0.41，", True),  # comma after
    ("1,000, then 30,000,", "1,000，然后 30,000，", True),
    ("heads 1,2 and 3", "第 1、2 和 3 个头", True),  # "1,2" is two numbers, not 1,2
])
def test_translation_numbers_rule(english, translated, ok):
    from babel.messages.catalog import Catalog

    catalogue = Catalog(locale="zh_CN")
    catalogue.add(english, translated)
    assert (translation_mismatches(catalogue) == []) is ok


@pytest.mark.parametrize("written, scale, value", [
    ("260", "亿", Decimal("26000000000")),
    ("2.6", "万", Decimal("26000")),
    ("1.2", "万亿", Decimal("1200000000000")),
    ("26", "billion", Decimal("26000000000")),
    ("1.04", "M", Decimal("1040000")),
    ("29", "k", Decimal("29000")),
    ("2.6e10", "", Decimal("26000000000")),
    ("26,000,000,000", "", Decimal("26000000000")),
    ("0.41", "", Decimal("0.41")),
    ("4.7%", "", None),  # a percentage or a factor has no plain value
    ("3x", "", None),
])
def test_number_value(written, scale, value):
    assert number_value(written, scale) == value


@pytest.mark.parametrize("english, translated, missing, extra", [
    # a factor: 倍 stands for the x (or ×, or "times") of the same digits
    ("about 3.5x faster", "快约 3.5 倍", [], []),
    ("about 3.5\u00d7 faster", "快约 3.5倍", [], []),
    ("4.2 times the uniform weight", "均匀权重的 4.2 倍", [], []),
    ("3x and 3 of them", "3 倍，其中 3 个", [], []),
    ("about 3.5x faster", "快约 3.6 倍", ["3.5x"], ["3.6 倍"]),
    ("about 3.5x faster", "快约 3.50 倍", ["3.5x"], ["3.50 倍"]),  # digits as written
    ("about 3.5x faster", "快约 3.5 倍，即 3.5x", [], ["3.5 倍"]),  # a multiset: once only
    ("4.7% of the rows", "4.7 倍的行", ["4.7%"], ["4.7 倍"]),  # a percentage is no factor
    ("3x faster", "快 3 倍", [], []),
    ("3\u00d7 faster", "快 3 倍", [], []),
    ("3x faster", "快 4 倍", ["3x"], ["4 倍"]),  # a wrong factor still fails
    # 万, 亿, 万亿: by value, whether the English writes an exponent, separators or a word
    ("2.6e10 FLOPs", "260 亿次浮点运算", [], []),
    ("26,000,000,000 FLOPs", "260亿次浮点运算", [], []),
    ("26 billion FLOPs", "260 亿次浮点运算", [], []),
    ("1.5 million tokens", "150 万个词元", [], []),
    ("29k pairs and 1.9e+14 FLOPs", "2.9 万对，190 万亿次浮点运算", [], []),
    ("30,000 parameters", "3 万个参数", [], []),
    ("120 million tokens", "1.2 亿个词元", [], []),
    ("120,000,000 tokens", "1.2 亿个词元", [], []),
    ("120 million tokens", "12 亿个词元", ["120"], ["12 亿"]),  # a wrong value still fails
    ("120,000,000 tokens", "1.2 万个词元", ["120,000,000"], ["1.2 万"]),
    ("2.6e10 FLOPs", "26 亿次浮点运算", ["2.6e10"], ["26 亿"]),  # off by ten
    ("2.6e10 FLOPs", "2.6 亿次浮点运算", ["2.6e10"], ["2.6 亿"]),
    ("26,312,000,000 FLOPs", "约 263 亿次", ["26,312,000,000"], ["263 亿"]),  # rounded
    ("1.5 million tokens", "15 万个词元", ["1.5"], ["15 万"]),
    ("260 hours", "260 亿小时", ["260"], ["260 亿"]),  # never by the digits alone
    ("260 million", "260 亿", ["260"], ["260 亿"]),
    ("4.7% of 30,000", "30,000 的 4.7%", [], []),  # everything else as before
    ("8,744 windows", "8744 个窗口", ["8,744"], ["8744"]),
])
def test_chinese_forms_of_a_number(english, translated, missing, extra):
    assert number_differences(english, translated) == (missing, extra)


def test_untranslated_messages_are_left_to_the_staleness_test():
    from babel.messages.catalog import Catalog

    catalogue = Catalog(locale="zh_CN")
    catalogue.add("MAE 0.792", "")
    assert translation_mismatches(catalogue) == []
