"""Bring the translation catalogues up to date with the English sources (``make po``).

    python tools/update_translations.py [TEMPLATES] [--locales locales] [--language zh_CN]

TEMPLATES is the folder of message templates (``.pot``) that ``make gettext`` writes,
``_build/gettext/_build/gettext`` by default. Two steps:

1. ``sphinx-intl update --no-obsolete``: every catalogue ``locales/<language>/LC_MESSAGES/
   <page>.po`` gets the new English messages (untranslated, or fuzzy with sphinx-intl's
   guess from a similar old message), loses the removed ones, and a new page gets a new
   catalogue.
2. The *format flags* are dropped from every catalogue of the language (``strip_format_flags``).
   Babel, which sphinx-intl uses, marks a message ``python-format`` when its English looks
   like a printf directive to it: "9.1% of" (``% o``), "10 % dropout" (``% d``), and
   ``python-brace-format`` for ``{cite}``. The catalogues hold prose, which no program
   formats, but ``msgfmt --check`` then requires every translation to repeat those
   "directives", so a natural Chinese sentence fails the check (or has to keep a stray
   ``% d``). Without the flags ``msgfmt --check`` checks what matters for prose (the syntax,
   the header). Babel adds the flag again each time it writes a catalogue, which is why this
   step follows every update; tests/book/test_translations.py fails when a committed catalogue
   carries one.

Nothing else in a catalogue changes: the text of every line without a format flag stays
byte for byte as sphinx-intl wrote it.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "_build" / "gettext" / "_build" / "gettext"

# A flag such as python-format, python-brace-format, c-format, or its negation no-...-format.
_FORMAT_FLAG = re.compile(r"^(?:no-)?[a-z0-9]+(?:-[a-z0-9]+)*-format$")


def strip_format_flags(text: str) -> str:
    """The catalogue ``text`` without format flags: a ``#,`` line keeps its other flags
    (``fuzzy``), and goes when it has none left."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith("#,"):
            flags = [f.strip() for f in line[2:].split(",") if f.strip()]
            kept = [f for f in flags if not _FORMAT_FLAG.match(f)]
            if len(kept) != len(flags):
                if not kept:
                    continue
                newline = line[len(line.rstrip("\r\n")):]
                line = "#, " + ", ".join(kept) + newline
        out.append(line)
    return "".join(out)


def has_format_flags(text: str) -> bool:
    return strip_format_flags(text) != text


def strip_catalogues(folder: Path) -> list[Path]:
    """Drop the format flags from every ``.po`` under ``folder``; the files changed."""
    changed = []
    for path in sorted(Path(folder).rglob("*.po")):
        text = path.read_text(encoding="utf-8")
        stripped = strip_format_flags(text)
        if stripped != text:
            path.write_text(stripped, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("templates", nargs="?", type=Path, default=TEMPLATES,
                        help="folder of the .pot templates (make gettext writes them)")
    parser.add_argument("--locales", type=Path, default=ROOT / "locales")
    parser.add_argument("--language", default="zh_CN")
    args = parser.parse_args(argv)
    if not args.templates.is_dir() or not any(args.templates.rglob("*.pot")):
        print(f"no message templates in {args.templates}: run `make gettext` first",
              file=sys.stderr)
        return 2
    subprocess.run([sys.executable, "-m", "sphinx_intl", "update", "-p", str(args.templates),
                    "-l", args.language, "-d", str(args.locales), "--no-obsolete"],
                   check=True)
    catalogues = args.locales / args.language / "LC_MESSAGES"
    changed = strip_catalogues(catalogues)
    print(f"format flags dropped from {len(changed)} catalogue(s) in {catalogues}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
