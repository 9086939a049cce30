"""The results card: a chapter's headline numbers, written by a full run.

    card = results.write_card("04_sequence_reversal", profile=PROFILE, seed=SEED, device=device,
                              wall_seconds=time.perf_counter() - T0,
                              params={"full_model": 35012},
                              metrics={"simple_mse": 0.91, "full_mse": 0.0004})
    card  # shows the card as a table

Only the ``full`` profile writes ``book/results/<notebook>.json`` and the ``gpu`` profile
``book/results/gpu/<notebook>.json``; smoke runs write nothing in the repository. The
book's results page gathers every card into one table.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .machine import cpu_model
from .precision import CARD_NAMES, CURRENT, Probe, current
from .runtime import results_dir

PROFILES = ("full", "smoke", "gpu")
RUN_FIELDS = ("notebook", "profile", "seed", "device", "torch", "wall_seconds", "precision",
              "cpu", "threads")  # the card's plain fields, in the order a card table shows them


def _plain(value):
    """Turn tensors, numpy scalars and nested containers into JSON-ready Python values."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"a results value must be a scalar, got a tensor of shape {tuple(value.shape)}"
            )
        value = value.item()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"a results value must be finite, got {value}")
        return float(f"{value:.6g}")
    raise TypeError(f"cannot store a {type(value).__name__} in a results card")


def make_card(
    notebook: str, profile: str, seed: int, device, wall_seconds: float, params: dict,
    metrics: dict, precision: str | None = CURRENT,
) -> dict:
    """Build the card as a dict (validated, JSON-ready).

    ``precision`` (what training ran in: ``float32``, ``bf16 autocast``, ...) defaults to
    ``"current"``, the one ``runtime.setup`` chose (``course_lib.precision.current()``); None
    records float32, as None means float32 everywhere in course_lib. The card also records
    the machine: ``cpu`` (model name), ``threads`` (PyTorch's CPU threads) and
    ``precision_probe`` (``{"bf16_speedup": 0.71, "source": "cached"}``: how the precision
    was chosen, see ``course_lib.precision.Probe``).
    """
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if not isinstance(metrics, dict) or not metrics:
        raise ValueError("metrics must be a non-empty dict of the chapter's headline numbers")
    return {
        "notebook": str(notebook),
        "profile": profile,
        "seed": int(seed),
        "device": torch.device(device).type,  # "cuda:0" -> "cuda"
        "torch": torch.__version__.split("+")[0],
        "wall_seconds": round(float(wall_seconds), 1),
        "precision": _precision_label(precision),
        "cpu": cpu_model(),
        "threads": torch.get_num_threads(),
        "precision_probe": (current().probe or Probe("override")).card(),
        "params": _plain(params or {}),
        "metrics": _plain(metrics),
    }


def _precision_label(precision) -> str:
    """A card's ``precision``: ``"current"`` is runtime.setup's choice, None float32."""
    if precision is None:
        return CARD_NAMES["fp32"]
    return current().card_name if precision == CURRENT else str(precision)


class _CardTable(pd.DataFrame):
    """A card table that shows every row: pandas cuts a long table to its first and last rows
    (``display.max_rows``), and a printed card must be complete to be checked against its JSON."""

    @property
    def _constructor(self):
        return _CardTable

    def __repr__(self) -> str:
        return self.to_string()

    def _repr_html_(self) -> str:
        return self.to_html()


def card_table(card: dict) -> pd.DataFrame:
    """The card as a two-column table (nested dicts become ``name.key`` rows); printed or
    displayed, it shows every row."""
    rows = []
    for key in RUN_FIELDS:
        if key in card:  # older cards lack the fields added later (precision, cpu, ...)
            rows.append((key, card[key]))
    for group in ("precision_probe", "params", "metrics"):
        for name, value in card.get(group, {}).items():
            if isinstance(value, dict):
                rows.extend((f"{group}.{name}.{k}", v) for k, v in value.items())
            else:
                rows.append((f"{group}.{name}", value))
    shown = [(k, f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in rows]
    return _CardTable(pd.DataFrame(shown, columns=["field", "value"]).set_index("field"))


def write_card(
    notebook: str,
    profile: str,
    seed: int,
    device,
    wall_seconds: float,
    params: dict,
    metrics: dict,
    directory: str | Path | None = None,
    precision: str | None = CURRENT,
) -> pd.DataFrame:
    """Write ``<results_dir>/<notebook>.json`` for a full run (``<results_dir>/gpu/`` for the
    gpu profile); return the card as a table.

    A smoke run writes nothing (unless ``directory`` is given explicitly).
    """
    card = make_card(notebook, profile, seed, device, wall_seconds, params, metrics, precision)
    if profile in ("full", "gpu") or directory is not None:
        if directory is not None:
            folder = Path(directory)
        else:
            folder = results_dir() / "gpu" if profile == "gpu" else results_dir()
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{notebook}.json"
        path.write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
        print(f"results card written to {path.name}")
    else:
        print(f"profile {profile!r}: results card not written")
    return card_table(card)


def read_cards(directory: str | Path | None = None) -> pd.DataFrame:
    """Every card in the folder, one row per notebook (metrics flattened)."""
    folder = Path(directory) if directory is not None else results_dir()
    rows = []
    for path in sorted(folder.glob("*.json")):
        card = json.loads(path.read_text(encoding="utf-8"))
        row = {k: card[k] for k in ("notebook", "device", "wall_seconds")}
        row.update(pd.json_normalize(card["metrics"]).iloc[0].to_dict() if card["metrics"] else {})
        rows.append(row)
    return pd.DataFrame(rows)


def code_sha256(notebook: str | Path) -> str:
    """SHA-256 of a notebook's code cells, in order: outputs, markdown and metadata left out.

    A run made by a script (chapter 9's ablation) records it; the chapter compares it with
    its own to tell whether that run executed the code the page shows.
    """
    path = Path(notebook)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not a notebook file: pass the .ipynb path")
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells")
    if not isinstance(cells, list):
        raise ValueError(f"{path} has no list of cells: is it a Jupyter notebook?")
    code = "\n# ---- cell ----\n".join("".join(c.get("source", "")) for c in cells
                                       if c.get("cell_type") == "code")
    return hashlib.sha256(code.encode("utf-8")).hexdigest()
