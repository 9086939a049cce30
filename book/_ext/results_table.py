"""Sphinx directive ``results-table``: every results card in one table, at build time.

A full run of a chapter notebook writes ``book/results/<notebook>.json``::

    {"notebook": "04_sequence_reversal", "profile": "full", "seed": 0, "device": "cpu",
     "torch": "2.13.0", "wall_seconds": 41.2, "params": {"full_model": 35012},
     "metrics": {"simple_mse": 0.91, "full_mse": 0.0004}}

In a page::

    ```{results-table}
    ```

gives one row per card, sorted by notebook: the chapter (linked when it is in the book),
the run (wall time, device, torch version, seed), parameter counts and metrics. Nested
values such as ``{"ablation": {"no_pe": 0.3}}`` are shown as ``ablation.no_pe``. With no
cards the directive says so instead of failing. Registered in ``_config.yml`` under
``sphinx.local_extensions``; its ``setup`` also registers the directives of
``results_claims.py`` (the claims table and figure, the sentence on seeds).
"""

from __future__ import annotations

import json
from pathlib import Path

import results_claims  # book/_ext is on sys.path: _config.yml lists it for local extensions
from docutils import nodes
from docutils.parsers.rst import directives
from results_format import fmt, table_row, texts, untranslatable
from sphinx import addnodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

COLUMNS = ["col_chapter", "col_run", "col_params", "col_metrics"]  # keys of TEXTS


def flatten(value, prefix: str = "") -> list[tuple[str, object]]:
    """``{"a": 1, "b": {"c": 2}}`` -> ``[("a", 1), ("b.c", 2)]``."""
    if isinstance(value, dict):
        items: list[tuple[str, object]] = []
        for key, sub in value.items():
            items.extend(flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return items
    return [(prefix, value)]




def fmt_seconds(seconds, language: str | None = "en") -> str:
    if not isinstance(seconds, (int, float)):
        return str(seconds)
    if seconds < 90:
        return texts(language)["seconds"].format(n=f"{seconds:.0f}")
    return texts(language)["minutes"].format(n=f"{seconds / 60:.1f}")


class ResultsTable(SphinxDirective):
    has_content = False
    option_spec = {"path": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        return untranslatable(self._run())

    @property
    def text(self) -> dict[str, str]:
        return texts(self.env.config.language)

    def _run(self) -> list[nodes.Node]:
        folder = Path(self.env.srcdir) / self.options.get("path", "book/results")
        cards = []
        for path in sorted(folder.glob("*.json")):
            self.env.note_dependency(str(path))
            try:
                card = json.loads(path.read_text(encoding="utf-8"))
                if "notebook" not in card:
                    raise KeyError("no 'notebook' key")
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning(f"results card {path.name} is not valid: {exc}",
                               location=(self.env.docname, self.lineno))
                continue
            cards.append(card)
        if not cards:
            where = self.options.get("path", "book/results")
            how = self.text["no_cards_gpu" if where.rstrip("/").endswith("gpu")
                            else "no_cards_full"]
            return [nodes.paragraph(text=self.text["no_cards"].format(how=how, where=where))]
        return [self._table(cards)]

    # ------------------------------------------------------------------ table building
    def _table(self, cards: list[dict]) -> nodes.table:
        table = nodes.table(classes=["results-table"])
        group = nodes.tgroup(cols=len(COLUMNS))
        table += group
        for width in (22, 16, 26, 36):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        group += head
        head += table_row([nodes.paragraph(text=self.text[c]) for c in COLUMNS])
        body = nodes.tbody()
        group += body
        for card in cards:
            body += table_row([
                self._chapter(card),
                self._run_info(card),
                self._pairs(card.get("params", {})),
                self._pairs(card.get("metrics", {})),
            ])
        return table


    def _chapter(self, card: dict) -> nodes.Node:
        stem = str(card["notebook"])
        docname = f"notebooks/{stem}"
        para = nodes.paragraph()
        if docname in self.env.found_docs:
            ref = addnodes.pending_xref("", refdomain="std", reftype="doc",
                                        reftarget=f"/{docname}", refexplicit=True,
                                        refdoc=self.env.docname)
            ref += nodes.inline(text=stem)
            para += ref
        else:
            para += nodes.Text(stem)
        if card.get("profile") != "full":
            para += nodes.emphasis(text=self.text["profile"].format(profile=card.get("profile")))
        return para

    def _run_info(self, card: dict) -> nodes.Node:
        text = self.text
        block = nodes.line_block()
        time = fmt_seconds(card.get("wall_seconds", "?"), self.env.config.language)
        block += nodes.line(text=text["run_on"].format(time=time,
                                                       device=card.get("device", "?")))
        block += nodes.line(text=text["torch_seed"].format(torch=card.get("torch", "?"),
                                                           seed=card.get("seed", "?")))
        if "precision" in card:  # recorded since mixed precision was added
            block += nodes.line(text=text["precision"].format(precision=card["precision"]))
        return block

    def _pairs(self, values) -> nodes.Node:
        pairs = flatten(values) if isinstance(values, dict) else [("", values)]
        if not pairs:
            return nodes.paragraph(text="")
        block = nodes.line_block()
        for name, value in pairs:
            line = nodes.line()
            if name:
                line += nodes.Text(self.text["pair"].format(name=name))
            line += nodes.strong(text=fmt(value))
            block += line
        return block


def setup(app):
    app.add_directive("results-table", ResultsTable)
    results_claims.setup(app)  # results-claims and results-seeds
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
