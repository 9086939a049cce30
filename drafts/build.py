"""Convert a jupytext percent script into notebooks/<name>.ipynb with the canonical Colab cell."""
import sys
from pathlib import Path

import jupytext
import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.colab_cell import COLAB_CELL  # noqa: E402

for src in sys.argv[1:]:
    src = Path(src)
    nb = jupytext.read(src)
    for cell in nb.cells:
        if cell.cell_type == "code" and "(Colab set-up cell" in cell.source:
            cell.source = COLAB_CELL
            cell.metadata["tags"] = ["remove-cell"]  # hidden in the book
        tags = cell.metadata.get("tags", [])
        if "hide-input" in tags:
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata.pop("jupytext", None)
    out = Path(__file__).resolve().parent.parent / "notebooks" / (src.stem + ".ipynb")
    nbformat.write(nb, out)
    print("wrote", out)
