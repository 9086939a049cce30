"""Reading a chapter's own code cells from a test (not a test module itself)."""
from __future__ import annotations

import json
from pathlib import Path


def code_cell_defining(notebook: Path, marker: str) -> str:
    """The source of the one code cell of ``notebook`` that contains ``marker``."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in cells if c["cell_type"] == "code"]
    found = [s for s in sources if marker in s]
    assert len(found) == 1, (f"{Path(notebook).name}: expected one code cell containing "
                             f"{marker!r}, found {len(found)}")
    return found[0]
