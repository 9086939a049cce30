"""The book's MyST markdown as markdown that Colab (and Jupyter) render: for the student edition.

Jupyter Book renders MyST; Colab and JupyterLab render plain markdown with HTML and math, and
show MyST's syntax as raw text, where a dropdown's answer under a predict-first exercise is
plain to see. ``convert`` turns a markdown cell's MyST into what they render:

- a ``:::{dropdown} Title`` block, and an ``:::{admonition} Title`` block with
  ``:class: dropdown``, become a collapsed HTML block, whose body is still markdown (the blank
  lines around it make Colab and JupyterLab render it)::

      <details>
      <summary>Title</summary>

      body

      </details>

  It is always collapsed (``:open:`` is dropped): in the student edition it may hold an answer.
- any other admonition (``{note}``, ``{tip}``, ``{warning}``, ``{admonition} Title``, ...)
  becomes a quote block whose first line is its title in bold;
- ``{cite}`key``` and ``{cite:p}`a,b``` become "(Vaswani et al., 2017; ...)", and
  ``{cite:t}`key``` "Vaswani et al. (2017)", from ``book/references.bib``, as the book's
  author-year style writes them (no author: the title in italics; no year: n.d.), each linked
  to the work's URL or DOI when the entry has one;
- ``{math}`x``` becomes ``$x$``; ``{ref}``, ``{numref}``, ``{doc}``, ``{term}`` and ``{eq}``
  with an explicit text (``{ref}`the text <label>```) become the text;
- a target line ``(label)=`` and a comment line ``% ...`` are removed.

Code (fenced blocks, inline code) is left as it is. A role or directive that has no
Colab form here (``{glue}``, ``{figure}``, a ``{ref}`` without its text, ...) raises
``ValueError`` naming it, so that no raw MyST reaches a student unnoticed.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIBLIOGRAPHY = ROOT / "book" / "references.bib"

ADMONITIONS = {"admonition", "note", "tip", "hint", "important", "warning", "caution",
               "attention", "danger", "error", "seealso"}
TEXT_ROLES = {"ref", "numref", "doc", "term", "eq"}  # need an explicit text: `text <target>`


# ------------------------------------------------------------------------- bibliography
@dataclass(frozen=True)
class Work:
    authors: tuple[str, ...]  # last names
    year: str | None
    title: str
    link: str | None


_ACCENTS = {'"': "\u0308", "'": "\u0301", "`": "\u0300", "^": "\u0302", "~": "\u0303",
            "c": "\u0327"}
_LETTERS = {"L": "Ł", "l": "ł", "o": "ø", "O": "Ø", "ss": "ß", "ae": "æ", "aa": "å"}


def latex_text(value: str) -> str:
    """BibTeX field text as plain text: ``M{\\"u}ller`` -> Müller, ``{\\L}ukasz`` -> Łukasz,
    braces and line breaks gone."""

    def accent(m: re.Match) -> str:
        return unicodedata.normalize("NFC", m.group(2) + _ACCENTS[m.group(1).strip()])

    value = re.sub(r"\\([\"'`^~]|c\s)\s*\{?([A-Za-z])\}?", accent, value)
    value = re.sub(r"\\(ss|ae|aa|[LlOo])\b\s*", lambda m: _LETTERS[m.group(1)], value)
    return re.sub(r"\s+", " ", value.replace("{", "").replace("}", "")).strip()


def _fields(body: str) -> dict[str, str]:
    """The ``name = {value}``, ``name = "value"`` and ``name = word`` fields of one entry."""
    fields, i = {}, 0
    while m := re.compile(r"[\s,]*([A-Za-z_-]+)\s*=\s*").match(body, i):
        name, i = m.group(1).lower(), m.end()
        if body[i] == "{":  # up to the brace that closes this one
            depth, j = 0, i
            while True:
                depth += {"{": 1, "}": -1}.get(body[j], 0)
                if depth == 0:
                    break
                j += 1
        elif body[i] == '"':
            j = body.index('"', i + 1)
        else:
            j = re.compile(r"[^,\s}]*").match(body, i).end()
            fields[name], i = body[i:j], j
            continue
        fields[name], i = body[i + 1:j], j + 1
    return fields


def _last_name(name: str) -> str:
    name = latex_text(name)
    if "," in name:  # "Last, First" (also "De Cock, Dean")
        return name.split(",", 1)[0].strip()
    return name.split()[-1]  # "First Last", or one word ("YANG")


def _split_names(field: str) -> list[str]:
    """The names of an author field: split at ' and ' outside braces."""
    names, depth, start, i = [], 0, 0, 0
    while i < len(field):
        if field[i] == "{":
            depth += 1
        elif field[i] == "}":
            depth -= 1
        elif depth == 0 and re.match(r"\s+and\s+", field[i:]):
            m = re.match(r"\s+and\s+", field[i:])
            names.append(field[start:i])
            i = start = i + m.end()
            continue
        i += 1
    return [n for n in names + [field[start:]] if n.strip()]


def parse_bibliography(text: str) -> dict[str, Work]:
    """{key: Work} of every ``@type{key, ...}`` entry of a BibTeX file."""
    works = {}
    for m in re.finditer(r"^@(\w+)\s*\{\s*([^,\s]+)\s*,", text, re.M):
        if m.group(1).lower() in ("comment", "string", "preamble"):
            continue
        depth, j = 1, m.end()
        while depth:  # the entry ends at the brace that closes `@type{`
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        fields = _fields(text[m.end():j - 1])
        people = fields.get("author") or fields.get("editor") or ""
        link = fields.get("url") or (f"https://doi.org/{fields['doi']}" if "doi" in fields
                                     else None)
        works[m.group(2)] = Work(authors=tuple(_last_name(n) for n in _split_names(people)),
                                 year=fields.get("year"),
                                 title=latex_text(fields.get("title", m.group(2))),
                                 link=link)
    return works


@functools.cache
def bibliography(path: Path = BIBLIOGRAPHY) -> dict[str, Work]:
    return parse_bibliography(Path(path).read_text(encoding="utf-8"))


def _who(work: Work) -> str:
    if not work.authors:
        return f"*{work.title}*"
    if len(work.authors) == 1:
        return work.authors[0]
    if len(work.authors) == 2:
        return f"{work.authors[0]} and {work.authors[1]}"
    return f"{work.authors[0]} et al."


def _linked(text: str, work: Work) -> str:
    return f"[{text}]({work.link})" if work.link else text


def citation(keys: list[str], textual: bool, works: dict[str, Work]) -> str:
    """"(A, 2017; B and C, 2018)", or with ``textual`` "A (2017), B and C (2018)"."""
    missing = [k for k in keys if k not in works]
    if missing:
        raise ValueError(f"cites {missing}, not in book/references.bib")
    if textual:
        return ", ".join(_linked(f"{_who(w)} ({w.year or 'n.d.'})", w)
                         for w in (works[k] for k in keys))
    return "(" + "; ".join(_linked(f"{_who(w)}, {w.year or 'n.d.'}", w)
                           for w in (works[k] for k in keys)) + ")"


# ------------------------------------------------------------------------- inline
_INLINE = re.compile(
    r"(?P<role>\{(?P<name>[a-z][\w:-]*)\}`(?P<content>[^`]+)`)"  # {role}`content`
    r"|(?P<code>(?P<ticks>`+).+?(?<!`)(?P=ticks)(?!`))",  # inline code: left as it is
    re.S)


def _role(name: str, content: str, works) -> str:
    if name in ("cite", "cite:p", "cite:ps", "cite:t", "cite:ts"):
        keys = [k.strip() for k in content.split(",") if k.strip()]
        return citation(keys, textual=name.startswith("cite:t"), works=works)
    if name == "math":
        return f"${content}$"
    if name in TEXT_ROLES:
        m = re.fullmatch(r"\s*(.*?)\s*<[^<>]+>\s*", content, re.S)
        if m and m.group(1):
            return m.group(1)
        raise ValueError(f"{{{name}}}`{content}` has no text of its own (write "
                         f"{{{name}}}`the text <{content}>`): Colab cannot resolve it")
    raise ValueError(f"the role {{{name}}} has no Colab form in tools/colab_markdown.py")


def _inline(text: str, works) -> str:
    return _INLINE.sub(lambda m: m.group("code") or _role(m.group("name"),
                                                          m.group("content"), works), text)


def _summary(title: str) -> str:
    """A title as the HTML of a <summary>, where markdown is not rendered."""
    parts = re.split(r"(`[^`]+`)", title)
    return "".join(f"<code>{html.escape(p[1:-1])}</code>" if p.startswith("`") and len(p) > 1
                   else html.escape(p, quote=False) for p in parts)


# ------------------------------------------------------------------------- blocks
_CODE_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_DIRECTIVE = re.compile(r"^ {0,3}(:{3,}|`{3,})\{([\w-]+)\}[ \t]*(.*)$")
_OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")


def _directive(name: str, title: str, options: dict[str, str], body: str) -> str:
    classes = options.get("class", "").split()
    if name == "dropdown" or (name in ADMONITIONS and "dropdown" in classes):
        title = title or ("Details" if name in ("dropdown", "admonition") else name.title())
        return f"<details>\n<summary>{_summary(title)}</summary>\n\n{body}\n\n</details>"
    if name in ADMONITIONS:
        title = title or name.title()
        lines = [f"**{title}**", ""] + body.split("\n")
        return "\n".join(f"> {line}".rstrip() for line in lines)
    raise ValueError(f"the directive {{{name}}} has no Colab form in tools/colab_markdown.py")


def _code_end(lines: list[str], start: int, marker: str) -> int:
    """The index of the line that closes the code fence ``marker`` opened at ``start``."""
    end = start + 1
    close = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}\s*$")
    while end < len(lines) and not close.match(lines[end]):
        end += 1
    return end


def _blocks(lines: list[str], works) -> list[str]:
    out, prose, i = [], [], 0

    def flush():
        if prose:
            out.extend(_inline("\n".join(prose), works).split("\n"))
            prose.clear()

    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        fence = _CODE_FENCE.match(line)
        if directive:
            flush()
            marker, name, title = directive.groups()
            j, options = i + 1, {}
            while j < len(lines) and _OPTION.match(lines[j]):
                key, value = _OPTION.match(lines[j]).groups()
                options[key] = value
                j += 1
            end = j  # the closing fence: the same character, at least as many (MyST)
            while end < len(lines):
                stripped = lines[end].strip()
                if stripped and set(stripped) == {marker[0]} and len(stripped) >= len(marker):
                    break
                code = _CODE_FENCE.match(lines[end])
                if marker[0] == ":" and code and not _DIRECTIVE.match(lines[end]):
                    end = _code_end(lines, end, code.group(1))  # a ::: in code is code
                end += 1
            if end == len(lines):
                raise ValueError(f"{line.strip()!r} is never closed")
            body = "\n".join(_blocks(lines[j:end], works)).strip("\n")
            out.extend(_directive(name, _inline(title.strip(), works), options,
                                  body).split("\n"))
            i = end + 1
        elif fence:  # code: copied as it is, up to its closing fence
            flush()
            end = _code_end(lines, i, fence.group(1))
            out.extend(lines[i:end + 1])
            i = end + 1
        elif re.match(r"^\([\w.:-]+\)=\s*$", line) or re.match(r"^%(\s|$)", line):
            i += 1  # a target or a comment: nothing to show
        else:
            prose.append(line)
            i += 1
    flush()
    return out


def convert(markdown: str, works: dict[str, Work] | None = None) -> str:
    """``markdown`` (one cell's MyST) as markdown that Colab renders (see the module
    docstring). ``works``: the bibliography, ``book/references.bib`` by default (read only
    when the cell cites)."""
    if works is None and "{cite" in markdown:
        works = bibliography()
    return "\n".join(_blocks(markdown.split("\n"), works or {}))
