"""course_lib.tuning.edge_check: where a search's winner sits, and whether to widen a range."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import loguniform, uniform

from course_lib import stats, tuning


def table(rows):
    """A search table, best first, as the notebooks build it."""
    return pd.DataFrame(rows).sort_values("val").rename_axis("config")


def paired_compare(errors, seed=0):
    """compare(a, b) for edge_check: paired bootstrap of mean validation error, a - b."""
    def compare(a, b):
        return stats.bootstrap(lambda x, y: float(x.mean() - y.mean()), errors[a], errors[b],
                               n_resamples=500, seed=seed)
    return compare


def test_positions_of_a_winner_inside_and_on_edges():
    rows = table([{"width": 64, "depth": 1, "lr": 1e-3, "val": 0.1},
                  {"width": 32, "depth": 2, "lr": 1e-4, "val": 0.2},
                  {"width": 128, "depth": 3, "lr": 1e-2, "val": 0.3}])
    space = {"width": [32, 64, 128], "depth": [1, 2, 3], "lr": loguniform(1e-4, 1e-2)}
    check = tuning.edge_check(rows, space)
    assert list(check.columns) == tuning.COLUMNS
    assert list(check.index) == ["width", "depth", "lr"]
    assert check.loc["width", "position"] == "inside"
    assert check.loc["depth", "position"] == "low edge"  # no compare given: no verdict
    # 1e-3 is the middle of 1e-4 .. 1e-2 on the log scale, not on the linear one
    assert check.loc["lr", "position"] == "inside (50% of the log range)"
    assert check.loc["lr", "searched"] == "0.0001 to 0.01, log-uniform"
    assert check.loc["width", "searched"] == "32, 64, 128"
    assert not check["widen"].any()


def test_linear_range_and_margin():
    rows = table([{"dropout": 0.29, "val": 0.1}, {"dropout": 0.1, "val": 0.2}])
    space = {"dropout": uniform(0.0, 0.3)}  # support 0 .. 0.3
    assert tuning.edge_check(rows, space)["position"].iloc[0].startswith("high edge")
    assert tuning.edge_check(rows, space, margin=0.01)["position"].iloc[0].startswith("inside")


def test_an_edge_that_is_really_better_says_widen():
    # validation error falls with width: the widest wins, clearly, and the range is too narrow
    rng = np.random.default_rng(0)
    base = rng.normal(1.0, 0.3, 400)  # shared difficulty of each validation row
    errors = {0: base + 0.30, 1: base + 0.20, 2: base + 0.05}
    rows = table([{"width": w, "val": errors[i].mean()} for i, w in enumerate([16, 32, 64])])
    check = tuning.edge_check(rows, {"width": [16, 32, 64]}, compare=paired_compare(errors))
    assert check.loc["width", "position"] == "high edge, better than the rest: widen"
    assert check.loc["width", "widen"]
    assert check.loc["width", "winner minus best off the edge"].startswith("-0.15")


def test_an_edge_won_by_luck_is_inconclusive_against_the_rest():
    rng = np.random.default_rng(1)
    base = rng.normal(1.0, 0.3, 400)
    noise = {i: rng.normal(0, 0.5, 400) for i in range(3)}  # same design, different luck
    errors = {i: base + noise[i] for i in range(3)}
    order = sorted(errors, key=lambda i: errors[i].mean())
    widths = {order[0]: 64, order[1]: 32, order[2]: 16}  # the luckiest sits on the edge
    rows = table([{"width": widths[i], "val": errors[i].mean()} for i in range(3)])
    check = tuning.edge_check(rows, {"width": [16, 32, 64]}, compare=paired_compare(errors))
    assert check.loc["width", "position"] == "high edge, inconclusive against the rest"
    assert not check.loc["width", "widen"]


def test_two_value_range_compares_with_the_other_value():
    # with only two values there is no inside; the other value is "off the edge"
    errors = {0: np.full(50, 1.0), 1: np.full(50, 1.0)}
    rows = table([{"layers": 2, "val": 1.0}, {"layers": 1, "val": 1.0}])
    check = tuning.edge_check(rows, {"layers": [1, 2]}, compare=paired_compare(errors))
    assert check.loc["layers", "position"] == "high edge, inconclusive against the rest"


def test_hard_limits_single_values_and_nothing_off_the_edge():
    rows = table([{"dropout": 0.0, "heads": 4, "depth": 3, "val": 0.1},
                  {"dropout": 0.1, "heads": 4, "depth": 3, "val": 0.2}])
    space = {"dropout": [0.0, 0.1, 0.2], "heads": [4], "depth": [2, 3]}
    called = []
    check = tuning.edge_check(rows, space, compare=lambda a, b: called.append((a, b)),
                              limits={"dropout": 0.0})
    assert check.loc["dropout", "position"] == "low edge, a hard limit"
    assert check.loc["heads", "position"] == "not searched"
    assert check.loc["depth", "position"] == "high edge, nothing off the edge was tried"
    assert called == []  # none of the three needed a comparison


def test_compare_gets_the_winner_and_the_best_configuration_off_the_edge():
    rows = table([{"width": 64, "val": 0.1}, {"width": 64, "val": 0.15},
                  {"width": 16, "val": 0.3}, {"width": 32, "val": 0.2}])
    seen = []

    def compare(a, b):
        seen.append((a, b))
        return stats.Interval(-0.1, -0.2, 0.05)

    tuning.edge_check(rows, {"width": [16, 32, 64]}, compare=compare)
    assert seen == [(0, 3)]  # the winner, and the best of the widths other than 64


def test_a_winner_worse_than_the_rest_means_a_mis_sorted_table():
    rows = table([{"width": 64, "val": 0.1}, {"width": 32, "val": 0.2}])
    with pytest.raises(ValueError, match="sorted best first"):
        tuning.edge_check(rows, {"width": [32, 64]},
                          compare=lambda a, b: stats.Interval(0.1, 0.05, 0.2))


@pytest.mark.parametrize("call, error, message", [
    (lambda r: tuning.edge_check(pd.DataFrame(), {"w": [1, 2]}), ValueError, "non-empty"),
    (lambda r: tuning.edge_check(r, {}), ValueError, "space must be a dict"),
    (lambda r: tuning.edge_check(r, {"depth": [1, 2]}), ValueError, "no column for"),
    (lambda r: tuning.edge_check(r, {"w": [1, 2]}, margin=0.7), ValueError, "between 0 and 0.5"),
    (lambda r: tuning.edge_check(r, {"w": [1, 2]}, limits={"x": 0}), ValueError,
     "not in space"),
    (lambda r: tuning.edge_check(r, {"w": [4, 8]}), ValueError, "not among the values"),
    (lambda r: tuning.edge_check(r, {"w": ["a", "b"]}), TypeError, "ordered values"),
    (lambda r: tuning.edge_check(r, {"w": 3}), TypeError, "non-empty list"),
    (lambda r: tuning.edge_check(r, {"w": uniform(5, 1)}), ValueError, "outside the searched"),
])
def test_bad_inputs_say_what_to_do(call, error, message):
    rows = table([{"w": 1, "val": 0.1}, {"w": 2, "val": 0.2}])
    with pytest.raises(error, match=message):
        call(rows)


def test_unbounded_distribution_has_no_edges():
    from scipy.stats import norm
    rows = table([{"w": 1.0, "val": 0.1}])
    with pytest.raises(ValueError, match="not finite"):
        tuning.edge_check(rows, {"w": norm(0, 1)})


# --------------------------------------------------------------------------- read_search
def _written_search(tmp_path, script_text="print('search')\n"):
    import json

    script = tmp_path / "search_demo.py"
    script.write_text(script_text)
    table = tmp_path / "search_demo.csv"
    pd.DataFrame({"model": ["a", "b"], "val_rmse": [0.1, 0.2]}).to_csv(table, index=False)
    meta = {"script_sha256": tuning.file_sha256(script),
            "table_sha256": tuning.file_sha256(table), "profile": "full"}
    table.with_suffix(".json").write_text(json.dumps(meta))
    return script, table


def test_read_search_returns_table_and_meta(tmp_path):
    script, table = _written_search(tmp_path)
    frame, meta = tuning.read_search(table, script=script)
    assert list(frame["model"]) == ["a", "b"] and meta["profile"] == "full"


def test_read_search_refuses_an_edited_table_or_a_changed_script(tmp_path):
    script, table = _written_search(tmp_path)
    script.write_text("print('changed')\n")
    with pytest.raises(ValueError, match="changed after it wrote search_demo.csv"):
        tuning.read_search(table, script=script)
    tuning.read_search(table)  # without the script only the table is checked
    table.write_text(table.read_text().replace("0.1", "0.05"))
    with pytest.raises(ValueError, match="is not the table its script wrote"):
        tuning.read_search(table)


def test_read_search_rewords_an_older_edge_label(tmp_path):
    """Searches committed before the wording rule say 'ties with the rest'; read, they say
    'inconclusive', and other labels pass unchanged."""
    script, table = _written_search(tmp_path)
    meta_path = table.with_suffix(".json")
    meta = json.loads(meta_path.read_text())
    meta["edge_checks"] = {"m": [{"setting": "lr", "position": "low edge, ties with the rest"},
                                 {"setting": "wd", "position": "inside"}]}
    meta_path.write_text(json.dumps(meta))
    _, read = tuning.read_search(table)
    assert [r["position"] for r in read["edge_checks"]["m"]] == [
        "low edge, inconclusive against the rest", "inside"]


def test_read_search_names_a_missing_file(tmp_path):
    script, table = _written_search(tmp_path)
    table.with_suffix(".json").unlink()
    with pytest.raises(FileNotFoundError, match=r"search_demo\.json is missing"):
        tuning.read_search(table)
    table.with_suffix(".json").write_text("{}")
    with pytest.raises(ValueError, match="has no 'script_sha256'"):
        tuning.read_search(table)
