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
the page silently. The functions below are plain Python, tested in tests/test_results_page.py.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from docutils import nodes
from docutils.parsers.rst import directives
from results_format import fmt, table_row  # one number format and row builder for the page
from sphinx import addnodes
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

OURS_COLOR = "#0072B2"  # blue, as positional information in course_lib.diagrams
BASELINE_COLOR = "#8C8C8C"  # grey: course_lib.diagrams.MUTED
INTERVAL_COLOR = "#56B4E9"  # sky blue

CLAIM_FIELDS = {"notebook", "claim", "metric", "better", "ours", "baseline", "interval"}
SIDE_FIELDS = {"label", "name", "key", "spread", "seeds", "ratio"}


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


def load_claims(path: Path) -> list[dict]:
    """The entries of ``claims.yml``, checked for shape (not yet against the cards)."""
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
        if interval is not None and (not isinstance(interval, dict)
                                     or set(interval) != {"low", "high"}):
            raise ClaimError(f"{where}: interval needs exactly the keys low and high, "
                             f"got {interval!r}")
    return entries


# ------------------------------------------------------------------------ binding and verdict
@dataclass
class Side:
    label: str
    value: float
    key: str | None = None  # None: the baseline of a ratio, 1 by definition
    spread: float | None = None
    seeds: int | None = None


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

    @property
    def gap(self) -> float:
        return self.ours.value - self.baseline.value

    @property
    def verdict(self) -> str:
        """With an interval: ahead, behind or tie. Without one: better, worse or equal."""
        if self.low is not None:
            if self.low <= 0.0 <= self.high:
                return "tie"
            ahead = self.high < 0 if self.better == "lower" else self.low > 0
            return "ahead" if ahead else "behind"
        if self.gap == 0:
            return "equal"
        better = self.gap < 0 if self.better == "lower" else self.gap > 0
        return "better" if better else "worse"

    @property
    def basis(self) -> str:
        """What the verdict rests on, in words."""
        if self.low is not None:
            if self.verdict == "tie":
                return "the 95% interval of the gap contains 0"
            return "the 95% interval of the gap excludes 0"
        seeds = self.ours.seeds
        if seeds and seeds > 1:
            return f"no interval for the gap: means over {seeds} seeds"
        return "no interval: single run"


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


def _label(spec: dict, card: dict, chapter: str, what: str) -> str:
    """The label, followed by the card's value at ``name`` when the spec has one (a model
    the run chose, such as the one with the lowest validation error)."""
    if "name" not in spec:
        return spec["label"]
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
    return f"{spec['label']}: {value}"


def _side(spec: dict, card: dict, chapter: str, what: str) -> Side:
    if spec.get("ratio"):
        return Side(label=spec["label"], value=1.0)
    side = Side(label=_label(spec, card, chapter, what), key=spec["key"],
                value=_number(card, spec["key"], chapter, f"{what} number"))
    if "spread" in spec:
        side.spread = _number(card, spec["spread"], chapter, f"{what} spread")
    if "seeds" in spec:
        side.seeds = int(_number(card, spec["seeds"], chapter, f"{what} seeds"))
    return side


def bind(entry: dict, cards: dict[str, dict]) -> Row:
    """One claim with its numbers from the cards; ``ClaimError`` if anything is missing."""
    chapter = str(entry["notebook"])
    if chapter not in cards:
        raise ClaimError(f"book/claims.yml: chapter {chapter}: there is no results card "
                         f"book/results/{chapter}.json (cards: {sorted(cards)})")
    card = cards[chapter]
    row = Row(notebook=chapter, claim=" ".join(str(entry["claim"]).split()),
              metric=str(entry["metric"]), better=entry["better"],
              ours=_side(entry["ours"], card, chapter, "our"),
              baseline=_side(entry["baseline"], card, chapter, "baseline"))
    if entry.get("interval"):
        row.low = _number(card, entry["interval"]["low"], chapter, "interval low")
        row.high = _number(card, entry["interval"]["high"], chapter, "interval high")
        if row.low > row.high:
            raise ClaimError(f"book/claims.yml: chapter {chapter}: interval low {row.low} is "
                             f"above high {row.high}; check the two keys")
    return row


def bind_all(claims_path: Path, results_dir: Path) -> list[Row]:
    cards = load_cards(results_dir)
    return [bind(entry, cards) for entry in load_claims(claims_path)]


# ------------------------------------------------------------------------ formatting
def fmt_signed(value: float) -> str:
    return ("+" if value > 0 else "") + fmt(value)


def side_value(side: Side) -> str:
    return "1 (by definition)" if side.key is None else fmt(side.value)


def side_detail(side: Side) -> str:
    """The spread over seeds and their number, when the card has them ('' otherwise)."""
    parts = []
    if side.spread is not None:
        parts.append(f"\u00b1 {fmt(side.spread)} (sd)")
    if side.seeds and side.seeds > 1:
        parts.append(f"mean of {side.seeds} seeds")
    return ", ".join(parts)


def gap_text(row: Row) -> str:
    text = f"gap {fmt_signed(row.gap)}"
    if row.low is not None:
        text += f", 95% interval [{fmt_signed(row.low)}, {fmt_signed(row.high)}]"
    return text


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


def figure_rows(rows: list[Row]) -> list[dict]:
    """What the figure draws per claim, in times-better units (tested without matplotlib)."""
    out = []
    for row in rows:
        verdict = row.verdict if row.low is not None else f"{row.verdict} (no interval)"
        label = f"{row.notebook[:2]} \u00b7 {row.ours.label} vs {row.baseline.label}"
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


def draw(rows: list[Row], image_format: str = "svg") -> bytes:
    """All claims on one axis: how much better than its baseline each one is, in percent.

    The axis is linear within a few percent of 0 and logarithmic beyond (matplotlib's
    ``asinh`` scale), so that a tie of 0.4% and a speed-up of 800% both stay readable.
    """
    import matplotlib
    from matplotlib.figure import Figure

    items = figure_rows(rows)
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
                ax.text(0.0, y, "  values not positive: see the table", va="center",
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
            label = f"{fmt(ratio)}\u00d7 better" if clipped else f"{x:+.1f}%"
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
        ax.set_xlabel("how much better than the baseline (0 = equal)")
        buffer = io.BytesIO()
        metadata = {"Date": None} if image_format == "svg" else {}
        fig.savefig(buffer, format=image_format, metadata=metadata, dpi=110)
    return buffer.getvalue()


# ------------------------------------------------------------------------ directives
def _chapter_ref(env, docname_from: str, stem: str) -> nodes.Node:
    docname = f"notebooks/{stem}"
    para = nodes.paragraph()
    if docname in env.found_docs:
        ref = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget=f"/{docname}",
                                    refexplicit=True, refdoc=docname_from)
        ref += nodes.inline(text=stem)
        para += ref
    else:
        para += nodes.Text(stem)
    return para


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
        rows = bind_all(claims_path, results_dir)  # ClaimError stops the build
        if not rows:
            return [nodes.paragraph(text=f"No claims in {claims_path.name} yet.")]
        return [self._table(rows), self._figure(rows)]

    def _table(self, rows: list[Row]) -> nodes.table:
        columns = [("Chapter", 14), ("Claim", 34), ("Ours", 18), ("Baseline", 18),
                   ("Verdict", 16)]
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
            arrow = "lower is better" if row.better == "lower" else "higher is better"
            body += table_row([
                _chapter_ref(self.env, self.env.docname, row.notebook),
                _lines(row.claim, [nodes.emphasis(text=f"{row.metric}, {arrow}")]),
                self._side_cell(row.ours),
                self._side_cell(row.baseline),
                _lines([nodes.strong(text=row.verdict)], row.basis, gap_text(row)),
            ])
        return table

    @staticmethod
    def _side_cell(side: Side) -> nodes.Node:
        detail = side_detail(side)
        return _lines(side.label, [nodes.strong(text=side_value(side))],
                      *([detail] if detail else []))


    @staticmethod
    def _figure(rows: list[Row]) -> nodes.figure:
        svg = draw(rows)
        uri = "data:image/svg+xml;base64," + base64.b64encode(svg).decode("ascii")
        figure = nodes.figure(classes=["results-claims-figure"])
        figure += nodes.image(uri=uri, alt="For each comparison in the table, how much better "
                              "than its baseline our number is, in percent")
        figure += nodes.caption(text=(
            "Every comparison of the table on one axis: how much better than its baseline "
            "our number is, in percent (ours over the baseline's, minus one, where higher is "
            "better; the baseline's over ours, minus one, where lower is better). The scale is "
            "linear within a few percent of 0 and logarithmic beyond, so that a gap of half a "
            "percent and a speed-up of several times both stay readable; a triangle at the "
            "right edge marks a ratio beyond the axis. Whiskers: the spread of our number over "
            "seeds, where the card has one. Light blue bar: the 95% interval of the gap, "
            "where the card has one; a bar that crosses 0 is a tie. Drawn from the cards when "
            "the book is built."))
        return figure


SEEDS_KEY = re.compile(r"(^|_)seeds$")


def seeds_sentence(cards: dict[str, dict]) -> str:
    """Which seed every card records, and which cards average over several seeds."""
    base = sorted({str(card.get("seed", "?")) for card in cards.values()})
    several = []
    for name, card in sorted(cards.items()):
        for key, value in (card.get("params") or {}).items():
            if SEEDS_KEY.search(key) and isinstance(value, int) and value > 1:
                several.append(f"{name} ({key} = {value})")
    first = (f"Every card records seed {base[0]} as its run's seed"
             if len(base) == 1 else f"The cards record seeds {', '.join(base)}")
    if not several:
        return first + "; no card records more than one seed."
    return (first + ". Most numbers come from one training run; these cards record models "
            "trained from several seeds, and say so under params: " + "; ".join(several)
            + ".")


class ResultsSeeds(SphinxDirective):
    has_content = False
    option_spec = {"path": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        folder = Path(self.env.srcdir) / self.options.get("path", "book/results")
        for path in sorted(folder.glob("*.json")):
            self.env.note_dependency(str(path))
        return [nodes.paragraph(text=seeds_sentence(load_cards(folder)))]


def setup(app):
    app.add_directive("results-claims", ResultsClaims)
    app.add_directive("results-seeds", ResultsSeeds)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
