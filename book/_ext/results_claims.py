"""What each chapter claims, against what, and who is ahead: built from the results cards.

``book/claims.yml`` lists the comparisons (a sentence, the card key of our number, the card
key of the baseline's, which direction is better, optionally the keys of a 95% interval of
the gap). This module looks the keys up in ``book/results/<notebook>.json`` and computes the
verdict, so the page holds no number typed by hand. In a page::

    ```{results-claims}
    ```

gives a table (chapter, claim, ours, baseline, verdict) and a figure (one row per claim: how
much better than its baseline our number is, with the interval where the card has one),
drawn with matplotlib while the book is built and embedded in the page as SVG. ::

    ```{results-seeds}
    ```

gives one sentence on the seeds the cards record. A claim whose card or key is missing stops
the build (``ClaimError``, naming the chapter and the key): a renamed metric must not empty
the page silently. The functions below are plain Python, tested in tests/book/test_results_page.py.

In another language than English (Sphinx's ``language``, e.g. ``zh_CN`` for the Chinese
edition) every generated word comes from that language's templates in ``results_format.TEXTS``
and every claim's words from its translation in claims.yml (``zh: {claim, metric, ours,
baseline}``, optionally ``names`` for the model names a card records, e.g. the one chosen
on validation); a claim without it stops the build of that edition. None of it goes into the
gettext catalogue. Like a catalogue's ``msgid``, ``zh.source`` records which English the
Chinese translates: a short hash of the claim's English words (``source_hash``); the build
ignores it, and tests/book/test_results_page.py fails when the English changed and the hash did
not (``stale_translations``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import directives
from results_format import (  # one number format, row builder and text set for the page
    TEXTS,
    fmt,
    language_key,
    table_row,
    texts,
    tidy,
    untranslatable,
)
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

OURS_COLOR = "#0072B2"  # blue, as positional information in course_lib.diagrams
BASELINE_COLOR = "#8C8C8C"  # grey: course_lib.diagrams.MUTED
INTERVAL_COLOR = "#56B4E9"  # sky blue

# A claim's words in each other language of the book: {"zh": {claim, metric, ours, baseline}},
# and optionally `names`, the translations of the model names a card may hold under a side's
# `name` key ({"gradient boosting": "梯度提升"}; a name not in it is shown as the card has it).
TRANSLATIONS = sorted(set(TEXTS) - {"en"})
TRANSLATED_FIELDS = {"claim", "metric", "ours", "baseline"}  # ours/baseline: their labels
# names: model names (above); source: the hash of the English it translates (source_hash)
OPTIONAL_TRANSLATED_FIELDS = {"names", "source"}
SOURCE_HASH_LENGTH = 12
CLAIM_FIELDS = {"notebook", "claim", "metric", "better", "ours", "baseline", "interval",
                *TRANSLATIONS}
SIDE_FIELDS = {"label", "name", "key", "spread", "seeds", "repeats", "ratio"}


class ClaimError(ExtensionError):
    """A claim that cannot be bound to its card: the build stops and says why."""


# ------------------------------------------------------------------------ reading the inputs
def lookup(card: dict, key: str):
    """``card["metrics"]["ablation"]["full"]`` for ``"metrics.ablation.full"``.

    A name that itself contains dots (``"LS 0.1"``) is found too: at each level the longest
    run of dotted parts that is a key wins. Raises ``KeyError`` when there is no such value.
    """
    def walk(value, parts):
        if not parts:
            return value
        if isinstance(value, dict):
            for n in range(len(parts), 0, -1):
                name = ".".join(parts[:n])
                if name in value:
                    try:
                        return walk(value[name], parts[n:])
                    except KeyError:
                        continue
        raise KeyError(key)

    return walk(card, key.split("."))


def load_cards(folder: Path) -> dict[str, dict]:
    """Every card of ``folder``, by notebook name."""
    cards = {}
    for path in sorted(Path(folder).glob("*.json")):
        card = json.loads(path.read_text(encoding="utf-8"))
        cards[str(card.get("notebook", path.stem))] = card
    return cards


def load_claims(path: Path, language: str | None = None) -> list[dict]:
    """The entries of ``claims.yml``, checked for shape (not yet against the cards).

    Every translation a claim has must hold exactly the fields of ``TRANSLATED_FIELDS``
    (and may hold ``names``, the translations of model names the card holds); with
    ``language`` other than English, every claim must have that language's.
    """
    lang = language_key(language)
    entries = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or []
    if not isinstance(entries, list):
        raise ClaimError(f"{path}: expected a list of claims, got {type(entries).__name__}")
    for i, entry in enumerate(entries, start=1):
        chapter = entry.get("notebook", "?") if isinstance(entry, dict) else "?"
        where = f"{path}, claim {i} ({chapter})"
        if not isinstance(entry, dict):
            raise ClaimError(f"{where}: expected a mapping, got {entry!r}")
        missing = {"notebook", "claim", "metric", "better", "ours", "baseline"} - set(entry)
        unknown = set(entry) - CLAIM_FIELDS
        if missing or unknown:
            raise ClaimError(f"{where}: missing fields {sorted(missing)}, unknown fields "
                             f"{sorted(unknown)}; allowed: {sorted(CLAIM_FIELDS)}")
        if entry["better"] not in ("lower", "higher"):
            raise ClaimError(f"{where}: better must be 'lower' or 'higher', got "
                             f"{entry['better']!r}")
        for side in ("ours", "baseline"):
            spec = entry[side]
            if not isinstance(spec, dict) or "label" not in spec or set(spec) - SIDE_FIELDS:
                raise ClaimError(f"{where}: {side} needs a label and a key, with optional "
                                 f"{sorted(SIDE_FIELDS - {'label', 'key'})}; got {spec!r}")
            if ("key" in spec) == bool(spec.get("ratio")):
                raise ClaimError(f"{where}: {side} needs exactly one of key or ratio: true")
        if entry["ours"].get("ratio"):
            raise ClaimError(f"{where}: only the baseline can be `ratio: true`")
        interval = entry.get("interval")
        if interval is not None and (
                not isinstance(interval, dict) or not {"low", "high"} <= set(interval)
                or set(interval) - {"low", "high", "envelope"}
                or interval.get("envelope", True) is not True):
            raise ClaimError(f"{where}: interval needs the keys low and high, and optionally "
                             f"envelope: true (its ends are the lowest and highest over "
                             f"several bootstrap seeds' 95% intervals); got {interval!r}")
        for key in TRANSLATIONS:
            if key not in entry:
                if key == lang:
                    raise ClaimError(
                        f"{where}: no {key!r} text, which the {language} edition needs: add "
                        f"`{key}: {{claim: ..., metric: ..., ours: ..., baseline: ...}}` (the "
                        "claim, the metric and the two labels in that language)")
                continue
            text = entry[key]
            names = text.get("names", {}) if isinstance(text, dict) else None
            words = ({k: v for k, v in text.items() if k not in OPTIONAL_TRANSLATED_FIELDS}
                     if names is not None else {})
            source = text.get("source") if isinstance(text, dict) else None
            if source is not None and not (isinstance(source, str) and re.fullmatch(
                    f"[0-9a-f]{{{SOURCE_HASH_LENGTH}}}", source)):
                raise ClaimError(f"{where}: {key}.source must be the quoted hash of the "
                                 f"English words, {SOURCE_HASH_LENGTH} hex digits (now "
                                 f"{source_hash(entry)!r}); got {source!r}")
            if (names is None or set(words) != TRANSLATED_FIELDS
                    or not all(isinstance(v, str) and v.strip() for v in words.values())
                    or not isinstance(names, dict)
                    or not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                               for k, v in names.items())):
                raise ClaimError(f"{where}: {key} needs exactly the texts "
                                 f"{sorted(TRANSLATED_FIELDS)}, each non-empty, and optionally "
                                 f"names (model name -> its {key} name); got {text!r}")
    return entries


def english_words(entry: dict) -> dict[str, str]:
    """The English words of a claim that its translations translate, spaces normalised
    (YAML may fold a line differently without changing a word)."""
    return {field: " ".join(str(value).split()) for field, value in [
        ("claim", entry["claim"]), ("metric", entry["metric"]),
        ("ours", entry["ours"]["label"]), ("baseline", entry["baseline"]["label"])]}


def source_hash(entry: dict) -> str:
    """A short hash of a claim's English words (claim, metric, the two labels): what its
    translation's ``source`` holds, so that a change to the English shows."""
    words = english_words(entry)
    text = "\n".join(words[field] for field in ("claim", "metric", "ours", "baseline"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:SOURCE_HASH_LENGTH]


def stale_translations(entries: list[dict], language: str) -> list[str]:
    """One line per claim whose ``language`` text has no ``source`` or one that is not the
    hash of today's English: the English changed after it was translated (check the
    translation, then set ``source`` to the hash this line gives)."""
    lang = language_key(language)
    out = []
    for i, entry in enumerate(entries, start=1):
        text = entry.get(lang)
        if not isinstance(text, dict):
            continue  # load_claims reports a missing translation
        expected, recorded = source_hash(entry), text.get("source")
        if recorded != expected:
            state = (f"{lang} has no source" if recorded is None
                     else f"{lang}.source is {recorded!r}")
            out.append(f"claim {i} ({entry.get('notebook', '?')}), "
                       f"{english_words(entry)['claim'][:60]!r}: {state}; the English now "
                       f"hashes to {expected!r}")
    return out


# ------------------------------------------------------------------------ binding and verdict
@dataclass
class Side:
    label: str
    value: float
    key: str | None = None  # None: the baseline of a ratio, 1 by definition
    spread: float | None = None
    seeds: int | None = None
    repeats: int | None = None  # a timing: medians over this many interleaved repeats


@dataclass
class Row:
    notebook: str
    claim: str
    metric: str
    better: str
    ours: Side
    baseline: Side
    low: float | None = None  # 95% interval of ours - baseline
    high: float | None = None
    envelope: bool = False  # low and high span several bootstrap seeds' 95% intervals

    @property
    def gap(self) -> float:
        return self.ours.value - self.baseline.value

    @property
    def verdict(self) -> str:
        """With an interval: ahead, behind or inconclusive (the interval contains 0; "tie" would
        need an equivalence margin stated in advance). Without one: better, worse or equal.

        The English word is the key; ``verdict_text`` gives it in the page's language."""
        if self.low is not None:
            if self.low <= 0.0 <= self.high:
                return "inconclusive"
            ahead = self.high < 0 if self.better == "lower" else self.low > 0
            return "ahead" if ahead else "behind"
        if self.gap == 0:
            return "equal"
        better = self.gap < 0 if self.better == "lower" else self.gap > 0
        return "better" if better else "worse"

    @property
    def basis(self) -> str:
        """What the verdict rests on, in words (English; ``basis_text`` for another)."""
        return basis_text(self, "en")


def verdict_text(row: Row, language: str | None = "en") -> str:
    return texts(language)[f"verdict_{row.verdict}"]


def basis_text(row: Row, language: str | None = "en") -> str:
    """What the verdict rests on, in words."""
    text = texts(language)
    if row.low is not None:
        key = "basis_contains" if row.verdict == "inconclusive" else "basis_excludes"
        return text[key + ("_envelope" if row.envelope else "")]
    seeds = row.ours.seeds
    if seeds and seeds > 1:
        return text["basis_seeds"].format(seeds=seeds)
    repeats = row.ours.repeats
    if repeats and repeats > 1:
        return text["basis_repeats"].format(repeats=repeats)
    return text["basis_single"]


def _number(card: dict, key: str, chapter: str, what: str) -> float:
    try:
        value = lookup(card, key)
    except KeyError:
        metrics = ", ".join(name for name in _flat_keys(card.get("metrics", {}), "metrics"))
        raise ClaimError(f"book/claims.yml: chapter {chapter}: {what} key {key!r} is not in its "
                         f"results card book/results/{chapter}.json (its metrics: "
                         f"{metrics}). Rename the key in book/claims.yml.") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ClaimError(f"book/claims.yml: chapter {chapter}: {what} key {key!r} holds "
                         f"{value!r}, not a finite number")
    return float(value)


def _flat_keys(value, prefix: str) -> list[str]:
    if isinstance(value, dict):
        out = []
        for name, sub in value.items():
            out.extend(_flat_keys(sub, f"{prefix}.{name}"))
        return out
    return [prefix]


def _label(spec: dict, card: dict, chapter: str, what: str, label: str,
           language: str | None = "en", names: dict | None = None) -> str:
    """The label (``label``: the spec's, or its translation), followed by the card's value at
    ``name`` when the spec has one (a model the run chose, such as the one with the lowest
    validation error), translated by ``names`` where it has the value."""
    if "name" not in spec:
        return label
    try:
        value = lookup(card, spec["name"])
    except KeyError:
        raise ClaimError(f"book/claims.yml: chapter {chapter}: {what} name key "
                         f"{spec['name']!r} is not in its results card "
                         f"book/results/{chapter}.json. Rename the key in book/claims.yml."
                         ) from None
    if not isinstance(value, str) or not value:
        raise ClaimError(f"book/claims.yml: chapter {chapter}: {what} name key "
                         f"{spec['name']!r} holds {value!r}, not a name")
    name = (names or {}).get(value, value)
    return tidy(texts(language)["named_label"].format(label=label, name=name), language)


def _side(spec: dict, card: dict, chapter: str, what: str, label: str | None = None,
          language: str | None = "en", names: dict | None = None) -> Side:
    label = spec["label"] if label is None else label
    if spec.get("ratio"):
        return Side(label=label, value=1.0)
    side = Side(label=_label(spec, card, chapter, what, label, language, names),
                key=spec["key"],
                value=_number(card, spec["key"], chapter, f"{what} number"))
    if "spread" in spec:
        side.spread = _number(card, spec["spread"], chapter, f"{what} spread")
    if "seeds" in spec:
        side.seeds = int(_number(card, spec["seeds"], chapter, f"{what} seeds"))
    if "repeats" in spec:
        side.repeats = int(_number(card, spec["repeats"], chapter, f"{what} repeats"))
    return side


def bind(entry: dict, cards: dict[str, dict], language: str | None = None) -> Row:
    """One claim with its numbers from the cards; ``ClaimError`` if anything is missing.

    The words (claim, metric, labels) are those of ``language``: the English fields, or the
    claim's translation (checked by ``load_claims``)."""
    chapter = str(entry["notebook"])
    if chapter not in cards:
        raise ClaimError(f"book/claims.yml: chapter {chapter}: there is no results card "
                         f"book/results/{chapter}.json (cards: {sorted(cards)})")
    card = cards[chapter]
    lang = language_key(language)
    if lang == "en":
        words = {"claim": entry["claim"], "metric": entry["metric"],
                 "ours": entry["ours"]["label"], "baseline": entry["baseline"]["label"]}
    else:
        words = entry[lang]
    row = Row(notebook=chapter, claim=" ".join(str(words["claim"]).split()),
              metric=" ".join(str(words["metric"]).split()), better=entry["better"],
              ours=_side(entry["ours"], card, chapter, "our", label=str(words["ours"]),
                         language=language, names=words.get("names")),
              baseline=_side(entry["baseline"], card, chapter, "baseline",
                             label=str(words["baseline"]), language=language,
                             names=words.get("names")))
    if entry.get("interval"):
        row.low = _number(card, entry["interval"]["low"], chapter, "interval low")
        row.high = _number(card, entry["interval"]["high"], chapter, "interval high")
        row.envelope = bool(entry["interval"].get("envelope"))
        if row.low > row.high:
            raise ClaimError(f"book/claims.yml: chapter {chapter}: interval low {row.low} is "
                             f"above high {row.high}; check the two keys")
    return row


def bind_all(claims_path: Path, results_dir: Path, language: str | None = None) -> list[Row]:
    cards = load_cards(results_dir)
    return [bind(entry, cards, language) for entry in load_claims(claims_path, language)]


# ------------------------------------------------------------------------ formatting
def fmt_signed(value: float) -> str:
    return ("+" if value > 0 else "") + fmt(value)


def side_value(side: Side, language: str | None = "en") -> str:
    if side.key is None:
        return texts(language)["by_definition"].format(value=fmt(side.value))
    return fmt(side.value)


def side_detail(side: Side, language: str | None = "en") -> str:
    """The spread over seeds and their number, when the card has them ('' otherwise)."""
    text = texts(language)
    parts = []
    if side.spread is not None:
        parts.append(text["spread"].format(spread=fmt(side.spread)))
    if side.seeds and side.seeds > 1:
        parts.append(text["mean_of_seeds"].format(seeds=side.seeds))
    return text["list_sep"].join(parts)


def gap_text(row: Row, language: str | None = "en") -> str:
    text = texts(language)
    out = text["gap"].format(gap=fmt_signed(row.gap))
    if row.low is not None:
        key = "gap_interval_envelope" if row.envelope else "gap_interval"
        out += text[key].format(low=fmt_signed(row.low), high=fmt_signed(row.high))
    return out


# ------------------------------------------------------------------------ the figure
def times_better(row: Row, ours_value: float | None = None) -> float | None:
    """How many times better than the baseline ours is (1 = equal, above 1 = better).

    ours / baseline when higher is better, baseline / ours when lower is better; None when
    a value is not positive (a ratio of log-probabilities means nothing).
    """
    ours = row.ours.value if ours_value is None else ours_value
    base = row.baseline.value
    if ours <= 0 or base <= 0:
        return None
    return ours / base if row.better == "higher" else base / ours


def figure_rows(rows: list[Row], language: str | None = "en") -> list[dict]:
    """What the figure draws per claim, in times-better units (tested without matplotlib)."""
    text = texts(language)
    out = []
    for row in rows:
        verdict = verdict_text(row, language)
        if row.low is None:
            verdict = text["fig_no_interval"].format(verdict=verdict)
        label = tidy(text["fig_label"].format(chapter=row.notebook[:2], ours=row.ours.label,
                                              baseline=row.baseline.label), language)
        item = {"verdict": verdict, "label": label, "metric": row.metric,
                "ratio": times_better(row), "interval": None, "spread": None}
        if item["ratio"] is not None and row.low is not None:
            ends = [times_better(row, row.baseline.value + d) for d in (row.low, row.high)]
            if None not in ends:
                item["interval"] = (min(ends), max(ends))
        if item["ratio"] is not None and row.ours.spread is not None:
            ends = [times_better(row, row.ours.value + d)
                    for d in (-row.ours.spread, row.ours.spread)]
            if None not in ends:
                item["spread"] = (min(ends), max(ends))
        out.append(item)
    return out


CLIP = 1000.0  # percent: a ratio beyond 11 times better is drawn at the edge, labelled


def percent_better(ratio: float) -> float:
    """Times better -> percent better: 1.05 -> 5, 2 -> 100, 0.5 -> -50."""
    return 100.0 * (ratio - 1.0)


def draw(rows: list[Row], image_format: str = "svg", language: str | None = "en") -> bytes:
    """All claims on one axis: how much better than its baseline each one is, in percent.

    The axis is linear within a few percent of 0 and logarithmic beyond (matplotlib's
    ``asinh`` scale), so that a tie of 0.4% and a speed-up of 800% both stay readable.
    """
    import matplotlib
    from matplotlib.figure import Figure

    text = texts(language)
    items = figure_rows(rows, language)
    with matplotlib.rc_context({"svg.hashsalt": "course-claims", "svg.fonttype": "none",
                                "font.size": 8.5}):
        fig = Figure(figsize=(8.0, 1.1 + 0.42 * len(items)), layout="constrained")
        ax = fig.subplots()
        ax.axvline(0.0, color=BASELINE_COLOR, lw=1, ls=":", zorder=0)
        ends = [0.0]
        for y, it in enumerate(items):
            ax.axhline(y, color="#EEEEEE", lw=0.6, zorder=0)
            ratio = it["ratio"]
            if ratio is None:
                ax.text(0.0, y, text["fig_not_positive"], va="center",
                        fontsize=7.5, color=BASELINE_COLOR)
                continue
            x = percent_better(ratio)
            ends.append(min(x, CLIP))
            if it["interval"]:
                a, b = (percent_better(e) for e in it["interval"])
                ax.plot([a, b], [y, y], color=INTERVAL_COLOR, lw=7, solid_capstyle="butt",
                        zorder=1)
                ends += [min(a, CLIP), min(b, CLIP)]
            if it["spread"]:
                a, b = (percent_better(e) for e in it["spread"])
                ax.errorbar(x, y, xerr=[[x - a], [b - x]], fmt="none", ecolor=OURS_COLOR,
                            elinewidth=1, capsize=3, zorder=2)
                ends += [min(a, CLIP), min(b, CLIP)]
            clipped = x > CLIP
            shown = min(x, CLIP)
            ax.plot(shown, y, ">" if clipped else "o", color=OURS_COLOR, ms=5.5, zorder=3,
                    clip_on=False)
            label = (text["fig_times_better"].format(ratio=fmt(ratio)) if clipped
                     else f"{x:+.1f}%")
            ax.annotate(label, (shown, y), xytext=(0, 5), textcoords="offset points",
                        fontsize=7.5, ha="right" if clipped else "center", va="bottom",
                        color="#222222")
        ax.set_xscale("asinh", linear_width=5.0)
        lo, hi = min(ends), max(ends)
        ticks = [t for t in (-90, -50, -20, 0, 10, 50, 200, 1000)
                 if lo * 1.3 - 3 <= t <= hi * 1.3 + 3]
        ax.set_xticks(ticks, [f"{t:+,}%" if t else "0" for t in ticks])
        ax.minorticks_off()
        ax.set_xlim(min(lo * 1.3, 0) - 3, hi * 1.3 + 3)
        ax.set_yticks(range(len(items)),
                      [f"{it['label']}\n{it['metric']}" for it in items], fontsize=7.5)
        ax.set_ylim(len(items) - 0.5, -0.7)
        for spine in ("left", "right", "top"):
            ax.spines[spine].set_visible(False)
        ax.tick_params(axis="y", length=0)
        ax.tick_params(axis="x", labelsize=7)
        verdicts = ax.secondary_yaxis("right")  # the verdict of each row, beside the plot
        verdicts.set_yticks(range(len(items)), [it["verdict"] for it in items], fontsize=7.5)
        verdicts.tick_params(length=0)
        verdicts.spines["right"].set_visible(False)
        ax.set_xlabel(text["fig_xlabel"])
        buffer = io.BytesIO()
        metadata = {"Date": None} if image_format == "svg" else {}
        with warnings.catch_warnings():
            # Chinese labels: matplotlib's font has no CJK glyphs and lays them out with its
            # missing-glyph box (about 1.15 em, a CJK glyph is 1 em, so the space suffices).
            # The SVG keeps the text as text (svg.fonttype none): the reader's browser draws
            # it with its own fonts. (matplotlib 3.8 says "missing from current font".)
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from (current )?font")
            fig.savefig(buffer, format=image_format, metadata=metadata, dpi=110)
    return buffer.getvalue()


# ------------------------------------------------------------------------ directives
def _chapter_ref(env, docname_from: str, stem: str) -> nodes.Node:
    docname = f"notebooks/{stem}"
    para = nodes.paragraph()
    if docname in env.found_docs:
        ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=f"/{docname}",
                                    refexplicit=True, refdoc=docname_from)
        ref += nodes.inline(text=_breakable(stem))
        para += ref
    else:
        para += nodes.Text(_breakable(stem))
    return para


def _breakable(stem: str) -> str:
    """A notebook name that may wrap after its underscores only (a zero-width space after
    each), so that a narrow column shows `04_sequence_` / `reversal`, not `04_sequen` / `ce_r`."""
    return stem.replace("_", "_\u200b")


def _lines(*parts) -> nodes.line_block:
    block = nodes.line_block()
    for part in parts:
        line = nodes.line()
        for piece in part if isinstance(part, list) else [part]:
            line += piece if isinstance(piece, nodes.Node) else nodes.Text(piece)
        block += line
    return block


class ResultsClaims(SphinxDirective):
    has_content = False
    option_spec = {"claims": directives.unchanged, "path": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        srcdir = Path(self.env.srcdir)
        claims_path = srcdir / self.options.get("claims", "book/claims.yml")
        results_dir = srcdir / self.options.get("path", "book/results")
        self.env.note_dependency(str(claims_path))
        for path in sorted(results_dir.glob("*.json")):
            self.env.note_dependency(str(path))
        language = self.env.config.language
        text = texts(language)
        rows = bind_all(claims_path, results_dir, language)  # ClaimError stops the build
        if not rows:
            return untranslatable([nodes.paragraph(
                text=text["no_claims"].format(name=claims_path.name))])
        return untranslatable([self._table(rows), self._figure(rows)])

    def _table(self, rows: list[Row]) -> nodes.table:
        language = self.env.config.language
        text = texts(language)
        columns = [(text["col_chapter"], 14), (text["col_claim"], 34), (text["col_ours"], 18),
                   (text["col_baseline"], 18), (text["col_verdict"], 16)]
        table = nodes.table(classes=["results-table", "results-claims"])
        group = nodes.tgroup(cols=len(columns))
        table += group
        for _, width in columns:
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += table_row([nodes.paragraph(text=name) for name, _ in columns])
        body = nodes.tbody()
        group += body
        for row in rows:
            metric = text["metric_lower" if row.better == "lower" else "metric_higher"]
            body += table_row([
                _chapter_ref(self.env, self.env.docname, row.notebook),
                _lines(row.claim, [nodes.emphasis(text=metric.format(metric=row.metric))]),
                self._side_cell(row.ours, language),
                self._side_cell(row.baseline, language),
                _lines([nodes.strong(text=verdict_text(row, language))],
                       basis_text(row, language), gap_text(row, language)),
            ])
        return table

    @staticmethod
    def _side_cell(side: Side, language: str | None) -> nodes.Node:
        detail = side_detail(side, language)
        return _lines(side.label, [nodes.strong(text=side_value(side, language))],
                      *([detail] if detail else []))

    def _figure(self, rows: list[Row]) -> nodes.figure:
        language = self.env.config.language
        text = texts(language)
        svg = draw(rows, language=language)
        uri = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
        figure = nodes.figure(classes=["results-claims-figure"])
        # Raw HTML, not an image node: Sphinx would extract an image's alt text into the
        # catalogue (whatever its `translatable`), and this alt is already in the page's
        # language.
        figure += nodes.raw("", f'<img alt="{html.escape(text["fig_alt"])}" src="{uri}" />',
                            format="html")
        figure += nodes.caption(text=text["fig_caption"])
        return figure


SEEDS_KEY = re.compile(r"(^|_)seeds$")


def seeds_sentence(cards: dict[str, dict], language: str | None = "en") -> str:
    """Which seed every card records, and which cards average over several seeds."""
    text = texts(language)
    base = sorted({str(card.get("seed", "?")) for card in cards.values()})
    several = []
    for name, card in sorted(cards.items()):
        for key, value in (card.get("params") or {}).items():
            if SEEDS_KEY.search(key) and isinstance(value, int) and value > 1:
                several.append(text["seeds_card"].format(name=name, key=key, value=value))
    first = (text["seeds_one"].format(seed=base[0]) if len(base) == 1
             else text["seeds_many"].format(seeds=", ".join(base)))
    if not several:
        return text["seeds_only_one"].format(first=first)
    return text["seeds_several"].format(first=first, cards=text["seeds_sep"].join(several))


class ResultsSeeds(SphinxDirective):
    has_content = False
    option_spec = {"path": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        folder = Path(self.env.srcdir) / self.options.get("path", "book/results")
        for path in sorted(folder.glob("*.json")):
            self.env.note_dependency(str(path))
        sentence = seeds_sentence(load_cards(folder), self.env.config.language)
        return untranslatable([nodes.paragraph(text=sentence)])


def setup(app):
    app.add_directive("results-claims", ResultsClaims)
    app.add_directive("results-seeds", ResultsSeeds)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
