"""The README's minutes row is the committed results cards' wall times, chapter by chapter,
and its total is their sum (so the row cannot drift from the runs it reports)."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def card_minutes() -> dict[int, float]:
    out = {}
    for card in sorted((ROOT / "book" / "results").glob("[0-9][0-9]_*.json")):
        chapter = int(card.name[:2])
        out[chapter] = json.loads(card.read_text(encoding="utf-8"))["wall_seconds"] / 60
    return out


def readme_row(label: str) -> list[str]:
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == label:
            return cells[1:]
    raise AssertionError(f"README.md has no table row starting with '| {label} |'")


def test_the_minutes_row_is_the_cards_wall_times():
    chapters = [int(c) for c in readme_row("chapter")]
    minutes = readme_row("minutes")
    cards = card_minutes()
    assert chapters == sorted(cards), (chapters, sorted(cards))
    assert minutes == [f"{cards[c]:.1f}" for c in chapters], (
        "README.md's minutes row differs from the results cards: write "
        + " | ".join(f"{cards[c]:.1f}" for c in chapters))


def test_the_readme_states_the_course_total():
    total = sum(card_minutes().values())
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"(\d+(?:\.\d)?) minutes in all", text)
    assert m, "README.md should say '<N> minutes in all' under the minutes row"
    assert m.group(1) == f"{total:.0f}", (m.group(1), f"{total:.0f}")
