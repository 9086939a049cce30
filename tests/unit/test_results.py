"""Unit tests of course_lib.results: building, writing and reading results cards."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

from course_lib import results, runtime
from course_lib.results import card_table, make_card, read_cards, write_card

ARGS = dict(
    profile="full",
    seed=0,
    device="cpu",
    wall_seconds=41.234,
    params={"full_model": 35012},
    metrics={"simple_mse": 0.91, "full_mse": 0.0004},
)


@pytest.fixture
def results_dir(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(folder))
    return folder


# --------------------------------------------------------------------------- make_card
@pytest.fixture(autouse=True)
def _fp32(monkeypatch):
    """Cards of a notebook that trains in float32, as ``runtime.setup`` leaves it."""
    from course_lib import precision

    saved = precision._CURRENT
    precision.set_current(precision.Precision("fp32"))
    yield
    precision._CURRENT = saved


def test_make_card_fields():
    card = make_card("04_sequence_reversal", **ARGS)
    assert card == {
        "notebook": "04_sequence_reversal",
        "profile": "full",
        "seed": 0,
        "device": "cpu",
        "torch": torch.__version__.split("+")[0],
        "wall_seconds": 41.2,
        "precision": "float32",  # what runtime.setup chose; float32 unless a notebook opts in
        "cpu": results.cpu_model(),  # the machine: CPU model and PyTorch's threads
        "threads": torch.get_num_threads(),
        "precision_probe": {"bf16_speedup": None, "source": "override"},  # named, not measured
        "params": {"full_model": 35012},
        "metrics": {"simple_mse": 0.91, "full_mse": 0.0004},
    }
    assert list(card)[:7] == list(results.RUN_FIELDS)[:7], "the first fields keep their order"
    assert "+" not in card["torch"]
    json.dumps(card)  # JSON-ready


def test_make_card_converts_values():
    card = make_card(
        "nb",
        "full",
        np.int64(3),
        torch.device("cpu"),
        np.float32(12.34),
        params={"n": torch.tensor(7), "m": np.int32(4)},
        metrics={
            "t": torch.tensor(0.5),
            "np": np.float64(0.25),
            "i": np.int64(2),
            "b": np.bool_(True),
            "nested": {"bleu": torch.tensor([31.5])},
            "lst": (1, np.float32(2.5)),
            "s": "text",
            "none": None,
            "long": 0.123456789,
        },
    )
    m = card["metrics"]
    assert card["device"] == "cpu" and card["seed"] == 3 and type(card["seed"]) is int
    assert card["wall_seconds"] == 12.3 and type(card["wall_seconds"]) is float
    assert card["params"] == {"n": 7, "m": 4} and type(card["params"]["n"]) is int
    assert m["t"] == 0.5 and type(m["t"]) is float
    assert m["np"] == 0.25 and type(m["np"]) is float
    assert m["i"] == 2 and type(m["i"]) is int
    assert m["b"] is True
    assert m["nested"] == {"bleu": 31.5}
    assert m["lst"] == [1, 2.5]
    assert m["s"] == "text" and m["none"] is None
    assert m["long"] == 0.123457  # six significant digits
    json.dumps(card)


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), -float("inf"), torch.tensor(float("nan")), np.float64("inf")],
)
def test_non_finite_values_are_rejected(bad):
    with pytest.raises(ValueError, match="must be finite, got"):
        make_card("nb", **{**ARGS, "metrics": {"loss": bad}})
    with pytest.raises(ValueError, match="must be finite"):
        make_card("nb", **{**ARGS, "params": {"nested": {"x": bad}}})


def test_non_scalar_tensor_is_rejected():
    with pytest.raises(ValueError, match=r"scalar, got a tensor of shape \(3,\)"):
        make_card("nb", **{**ARGS, "metrics": {"loss": torch.ones(3)}})


def test_unsupported_type_is_rejected():
    with pytest.raises(TypeError, match="cannot store a object"):
        make_card("nb", **{**ARGS, "metrics": {"loss": object()}})


@pytest.mark.parametrize("profile", ["fast", "Full", "", None])
def test_bad_profile_is_rejected(profile):
    with pytest.raises(ValueError, match=f"profile must be one of.*got {profile!r}"):
        make_card("nb", **{**ARGS, "profile": profile})


@pytest.mark.parametrize("metrics", [{}, None, [("loss", 1.0)]])
def test_metrics_must_be_a_non_empty_dict(metrics):
    with pytest.raises(ValueError, match="metrics must be a non-empty dict"):
        make_card("nb", **{**ARGS, "metrics": metrics})


def test_params_may_be_empty():
    assert make_card("nb", **{**ARGS, "params": None})["params"] == {}


# --------------------------------------------------------------------------- card_table
def test_a_long_card_prints_every_row():
    # pandas shows only the first and last rows of a table longer than display.max_rows; a
    # card printed in a notebook must show them all, so that tests can check it row by row
    metrics = {f"m{i:03d}": float(i) for i in range(150)}
    table = card_table(make_card("nb", **{**ARGS, "metrics": metrics}))
    assert len(table) > pd.get_option("display.max_rows")
    for text in (repr(table), table._repr_html_()):
        assert "m000" in text and "m075" in text and "m149" in text and "..." not in text
    assert isinstance(table.head(3), type(table))  # pandas operations keep the full display


def test_card_table_rows():
    card = make_card(
        "nb", **{**ARGS, "metrics": {"bleu": {"val": 30.1, "test": 29.5}, "loss": 1.5}}
    )
    table = card_table(card)
    assert list(table.columns) == ["value"]
    assert table.index.tolist() == [
        "notebook",
        "profile",
        "seed",
        "device",
        "torch",
        "wall_seconds",
        "precision",
        "cpu",
        "threads",
        "precision_probe.bf16_speedup",
        "precision_probe.source",
        "params.full_model",
        "metrics.bleu.val",
        "metrics.bleu.test",
        "metrics.loss",
    ]
    # values are shown as text, floats with six significant digits
    assert table.loc["metrics.bleu.test", "value"] == "29.5"
    assert table.loc["params.full_model", "value"] == "35012"
    assert table.loc["notebook", "value"] == "nb"
    assert table.loc["seed", "value"] == "0"
    assert table.loc["wall_seconds", "value"] == "41.2"


def test_card_table_of_an_older_card_shows_what_it_has():
    """Cards written before cpu, threads and the probe were recorded print as they did."""
    card = make_card("nb", **ARGS)
    for key in ("precision", "cpu", "threads", "precision_probe"):
        del card[key]
    assert card_table(card).index.tolist() == [
        "notebook", "profile", "seed", "device", "torch", "wall_seconds",
        "params.full_model", "metrics.simple_mse", "metrics.full_mse"]


# --------------------------------------------------------------------------- write / read
def test_full_profile_writes_json(results_dir, capsys):
    table = write_card("04_sequence_reversal", **ARGS)
    path = results_dir / "04_sequence_reversal.json"
    assert path.is_file()
    assert json.loads(path.read_text()) == make_card("04_sequence_reversal", **ARGS)
    assert isinstance(table, pd.DataFrame)
    assert table.loc["metrics.full_mse", "value"] == "0.0004"
    assert "04_sequence_reversal.json" in capsys.readouterr().out
    assert runtime.results_dir() == results_dir


def test_smoke_profile_writes_nothing(results_dir, capsys):
    table = write_card("zz_test_smoke_card", **{**ARGS, "profile": "smoke"})
    assert not results_dir.exists() or not any(results_dir.iterdir())
    assert not (runtime.repo_root() / "book" / "results" / "zz_test_smoke_card.json").exists()
    assert table.loc["profile", "value"] == "smoke"
    assert "not written" in capsys.readouterr().out


def test_explicit_directory_is_written_even_for_smoke(tmp_path, results_dir):
    write_card("nb", **{**ARGS, "profile": "smoke"}, directory=tmp_path / "elsewhere")
    assert json.loads((tmp_path / "elsewhere" / "nb.json").read_text())["profile"] == "smoke"
    assert not results_dir.exists()


def test_invalid_card_writes_nothing(results_dir):
    with pytest.raises(ValueError):
        write_card("nb", **{**ARGS, "metrics": {"loss": float("nan")}})
    assert not results_dir.exists()


def test_read_cards(results_dir):
    write_card("02_b", **{**ARGS, "metrics": {"bleu": {"test": 30.0}}})
    write_card("01_a", **{**ARGS, "device": "cuda", "metrics": {"mse": 0.5}})
    (results_dir / "notes.txt").write_text("not a card")
    table = read_cards()
    assert table["notebook"].tolist() == ["01_a", "02_b"]  # sorted by file name
    assert table["device"].tolist() == ["cuda", "cpu"]
    assert table["wall_seconds"].tolist() == [41.2, 41.2]
    assert table.loc[0, "mse"] == 0.5 and np.isnan(table.loc[1, "mse"])
    assert table.loc[1, "bleu.test"] == 30.0
    assert read_cards(results_dir).equals(table)


def test_read_cards_of_an_empty_folder(tmp_path):
    assert read_cards(tmp_path).empty


def test_profiles_constant():
    assert results.PROFILES == ("full", "smoke", "gpu")


# --------------------------------------------------------------------------- committed cards
# A chapter whose committed headline model peaked at its cap would be listed here, with the
# reason its page gives, so that the exception is explicit; the test then fails (and asks
# for the entry to go) once a rerun trains it to its best epoch. None is, today.
KNOWN_CAPPED: dict[str, str] = {}


def test_no_committed_headline_model_peaked_at_its_cap():
    """Converged, not capped: a card that records whether its headline model's best epoch
    was the cap (``headline_best_at_cap`` or ``best_at_cap`` in its params) must say it was
    not, except for the chapters listed in KNOWN_CAPPED, which must still be capped."""
    folder = runtime.repo_root() / "book" / "results"
    cards = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")}
    recorded = {}
    for name, card in cards.items():
        params = card.get("params", {})
        for key in ("headline_best_at_cap", "best_at_cap"):
            if key in params:
                recorded[name] = bool(params[key])
    assert {"05_time_series", "06_tabular", "09_translation", "12_finetuning"} <= set(recorded)
    capped = {name for name, at_cap in recorded.items() if at_cap}
    assert capped <= set(KNOWN_CAPPED), (
        f"headline model peaked at its cap in {sorted(capped - set(KNOWN_CAPPED))}: "
        "train it longer (early stopping with a higher cap)")
    assert set(KNOWN_CAPPED) <= capped, (
        f"{sorted(set(KNOWN_CAPPED) - capped)} no longer peak at the cap: "
        "remove them from KNOWN_CAPPED")


def test_code_sha256_sees_code_only(tmp_path):
    """The hash changes with a code cell and not with markdown or outputs; a wrong path or a
    file that is not a notebook says what to pass."""
    def notebook(code, text, outputs):
        cells = [{"cell_type": "markdown", "source": [text]},
                 {"cell_type": "code", "source": [code], "outputs": outputs}]
        path = tmp_path / f"n{len(list(tmp_path.iterdir()))}.ipynb"
        path.write_text(json.dumps({"cells": cells}))
        return path

    base = results.code_sha256(notebook("x = 1\n", "# one", []))
    assert base == results.code_sha256(notebook("x = 1\n", "# two", [{"text": "1"}]))
    assert base != results.code_sha256(notebook("x = 2\n", "# one", []))
    with pytest.raises(FileNotFoundError, match="pass the .ipynb path"):
        results.code_sha256(tmp_path / "missing.ipynb")
    (tmp_path / "plain.json").write_text("{}")
    with pytest.raises(ValueError, match="Jupyter notebook"):
        results.code_sha256(tmp_path / "plain.json")
