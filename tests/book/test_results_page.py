"""The results page: claims bound to the results cards, computed verdicts, no typed numbers.

Tests the Sphinx extension in book/_ext/ (``results_claims``) as plain Python, the committed
``book/claims.yml`` against the committed cards (a renamed metric fails here, before the
book is built), and small Sphinx builds that use the directives the way the book does: in
English, in Chinese (every claim has its Chinese words, the generated text comes from the
extension's Chinese templates) and with the gettext builder (no generated text becomes a
catalogue message). Each claim's Chinese records the English it translates (``zh.source``, a
hash of the English words): a change to the English fails here until the Chinese is checked
and the hash updated, as a changed ``msgid`` does for the catalogues.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import results_claims as rc  # noqa: E402
import results_format as rf  # noqa: E402
from test_prose_numbers import number_differences, quoted_numbers  # noqa: E402

CLAIMS = ROOT / "book" / "claims.yml"
RESULTS = ROOT / "book" / "results"

CARD = {"notebook": "05_demo", "profile": "full", "seed": 0, "device": "cpu",
        "torch": "2.13.0", "wall_seconds": 10.0, "params": {"seeds": 3},
        "metrics": {"mae_model": 0.79, "mae_base": 0.84, "std_mae_model": 0.01,
                    "gap_low": -0.07, "gap_high": -0.03, "speedup": 2.5,
                    "ablation": {"LS 0.1": {"val_bleu": 4.2}}}}


def claim(**changes) -> dict:
    entry = {"notebook": "05_demo", "claim": "The model against the baseline.",
             "metric": "test MAE", "better": "lower",
             "ours": {"label": "model", "key": "metrics.mae_model",
                      "spread": "metrics.std_mae_model", "seeds": "params.seeds"},
             "baseline": {"label": "baseline", "key": "metrics.mae_base"},
             "interval": {"low": "metrics.gap_low", "high": "metrics.gap_high"}}
    entry.update(changes)
    return {k: v for k, v in entry.items() if v is not None}


def row(low=None, high=None, ours=0.79, base=0.84, better="lower", seeds=None) -> rc.Row:
    return rc.Row("05_demo", "c", "m", better, rc.Side("ours", ours, "k", seeds=seeds),
                  rc.Side("base", base, "k"), low, high)


# --------------------------------------------------------------------------- the committed page
def test_committed_claims_bind_to_the_committed_cards():
    rows = rc.bind_all(CLAIMS, RESULTS)
    assert rows, "book/claims.yml lists no claim"
    cards = rc.load_cards(RESULTS)
    for r in rows:
        assert r.notebook in cards
        assert r.verdict in {"ahead", "behind", "inconclusive", "better", "worse", "equal"}


def test_no_number_is_typed_on_the_results_page():
    """The page's numbers all come from the cards: its sources quote none (the level of
    the intervals excepted)."""
    allowed = {"95%"}
    for path in (ROOT / "book" / "results.md", CLAIMS):
        text = path.read_text(encoding="utf-8")
        text = re.sub(r'source: "[0-9a-f]+"', "source:", text)  # hashes, not numbers
        typed = [q for q, _ in quoted_numbers(text) if q not in allowed]
        assert typed == [], f"{path.name} types numbers by hand: {typed}"


def test_every_claim_has_its_chinese_text_with_the_same_numbers():
    """The Chinese edition's build stops on a claim without Chinese words; this fails first.
    A number in the English words (chapter 7, 128 tokens) is in the Chinese ones, as written."""
    entries = rc.load_claims(CLAIMS, "zh_CN")
    rows = rc.bind_all(CLAIMS, RESULTS, "zh_CN")
    english = rc.bind_all(CLAIMS, RESULTS)
    assert len(rows) == len(english) == len(entries)
    for entry, zh, en in zip(entries, rows, english):
        where = f"claims.yml, {entry['notebook']}: {en.claim[:50]!r}"
        for field, zh_text, en_text in [("claim", zh.claim, en.claim),
                                        ("metric", zh.metric, en.metric),
                                        ("ours", zh.ours.label, en.ours.label),
                                        ("baseline", zh.baseline.label, en.baseline.label)]:
            missing, extra = number_differences(en_text, zh_text)
            assert not missing and not extra, (
                f"{where}: zh.{field} {zh_text!r} lacks the numbers {missing} of the English "
                f"{en_text!r} and has {extra} that it lacks")
            if field in ("claim", "metric"):
                assert re.search("[\u4e00-\u9fff]", zh_text), f"{where}: zh.{field} is not Chinese"
        assert (zh.ours.value, zh.baseline.value, zh.verdict) == \
            (en.ours.value, en.baseline.value, en.verdict)


def test_every_chinese_text_translates_the_current_english():
    """zh.source is the hash of the English words the Chinese was checked against: when the
    English claim, metric or a label changes, this fails until the Chinese is checked and
    zh.source updated to the hash it prints."""
    stale = rc.stale_translations(rc.load_claims(CLAIMS, "zh_CN"), "zh_CN")
    assert not stale, (
        f"{len(stale)} Chinese text(s) in book/claims.yml translate an older English: check "
        "each against its English, then set its zh.source (quoted) to the new hash:\n  "
        + "\n  ".join(stale))


def test_source_hash_follows_the_english_words_only():
    entry = claim(zh={**ZH, "source": "0" * 12})
    same = rc.source_hash(entry)
    assert len(same) == rc.SOURCE_HASH_LENGTH
    assert rc.source_hash({**entry, "claim": " The model  against\nthe baseline. "}) == same
    assert rc.source_hash({**entry, "zh": {**ZH, "claim": "另一句。"}}) == same
    assert rc.source_hash({**entry, "better": "higher"}) == same  # not words to translate
    changed = [claim(claim="The model against the old baseline."),
               claim(metric="test RMSE"),
               claim(ours={"label": "our model", "key": "metrics.mae_model"}),
               claim(baseline={"label": "ridge", "key": "metrics.mae_base"})]
    assert len({same} | {rc.source_hash(c) for c in changed}) == 5


def test_a_stale_chinese_text_is_found(tmp_path):
    import yaml

    current = claim(zh={**ZH, "source": rc.source_hash(claim())})
    edited = {**current, "claim": "The model against a new baseline."}  # zh not updated
    unstamped = claim(zh=ZH)
    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump([current, edited, unstamped], allow_unicode=True),
                    encoding="utf-8")
    entries = rc.load_claims(path, "zh_CN")  # source is allowed in the build
    stale = rc.stale_translations(entries, "zh_CN")
    assert [line.split(",")[0] for line in stale] == ["claim 2 (05_demo)", "claim 3 (05_demo)"]
    assert rc.source_hash(edited) in stale[0] and "has no source" in stale[1]
    assert rc.stale_translations(entries[:1], "zh_CN") == []
    r = rc.bind(entries[0], {"05_demo": CARD}, "zh_CN")  # and binds as before
    assert (r.claim, r.ours.label) == (ZH["claim"], ZH["ours"])


@pytest.mark.parametrize("source", [123456789012, "abc", "ABCDEF012345", "0" * 13])
def test_a_malformed_source_is_refused(tmp_path, source):
    import yaml

    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump([claim(zh={**ZH, "source": source})], allow_unicode=True),
                    encoding="utf-8")
    with pytest.raises(rc.ClaimError, match="zh.source must be the quoted hash"):
        rc.load_claims(path)


def test_seed_sentence_names_every_card_with_several_seeds():
    cards = rc.load_cards(RESULTS)
    sentence = rc.seeds_sentence(cards)
    several = [name for name, card in cards.items()
               for key, value in card.get("params", {}).items()
               if key.endswith("seeds") and isinstance(value, int) and value > 1]
    assert {"05_time_series", "06_tabular"} <= set(several), several
    for name in several:
        assert name in sentence
    assert "seed 0" in sentence


# --------------------------------------------------------------------------- binding
def test_bind_reads_every_number_from_the_card():
    r = rc.bind(claim(), {"05_demo": CARD})
    assert (r.ours.value, r.baseline.value, r.ours.spread, r.ours.seeds) == (0.79, 0.84, 0.01, 3)
    assert (r.low, r.high) == (-0.07, -0.03)
    assert r.gap == pytest.approx(-0.05)


def test_name_key_adds_the_cards_choice_to_the_label():
    card = {**CARD, "params": {**CARD["params"], "chosen": "MLP", "count": 3}}
    ours = {"label": "chosen on validation", "name": "params.chosen", "key": "metrics.mae_model"}
    r = rc.bind(claim(ours=ours), {"05_demo": card})
    assert r.ours.label == "chosen on validation: MLP"
    with pytest.raises(rc.ClaimError, match="name key 'params.gone' is not in its results card"):
        rc.bind(claim(ours={**ours, "name": "params.gone"}), {"05_demo": card})
    with pytest.raises(rc.ClaimError, match="holds 3, not a name"):
        rc.bind(claim(ours={**ours, "name": "params.count"}), {"05_demo": card})


def test_name_key_in_chinese_uses_the_translated_label_and_names():
    card = {**CARD, "params": {**CARD["params"], "chosen": "MLP", "second": "ridge"}}
    zh = {**ZH, "ours": "验证集上选出的模型", "baseline": "验证集上排名第二",
          "names": {"ridge": "岭回归"}}
    entry = claim(ours={"label": "chosen", "name": "params.chosen", "key": "metrics.mae_model"},
                  baseline={"label": "second", "name": "params.second",
                            "key": "metrics.mae_base"}, zh=zh)
    r = rc.bind(entry, {"05_demo": card}, "zh_CN")
    # a name the translation has is translated; one it lacks (MLP) is shown as the card has it
    assert (r.ours.label, r.baseline.label) == ("验证集上选出的模型：MLP",
                                                "验证集上排名第二：岭回归")
    assert rc.bind(entry, {"05_demo": card}).baseline.label == "second: ridge"


def test_missing_key_names_the_chapter_and_the_key():
    bad = claim(baseline={"label": "baseline", "key": "metrics.mae_renamed"})
    with pytest.raises(rc.ClaimError, match=r"chapter 05_demo: baseline number key "
                       r"'metrics.mae_renamed' is not in its results card"):
        rc.bind(bad, {"05_demo": CARD})
    with pytest.raises(rc.ClaimError, match="interval low key 'metrics.nope'"):
        rc.bind(claim(interval={"low": "metrics.nope", "high": "metrics.gap_high"}),
                {"05_demo": CARD})
    with pytest.raises(rc.ClaimError, match="chapter 99_gone: there is no results card"):
        rc.bind(claim(notebook="99_gone"), {"05_demo": CARD})


def test_non_numbers_and_inverted_intervals_are_refused():
    card = {**CARD, "metrics": {**CARD["metrics"], "text": "fp32", "gap_high": -0.09}}
    with pytest.raises(rc.ClaimError, match="holds 'fp32', not a finite number"):
        rc.bind(claim(ours={"label": "m", "key": "metrics.text"}), {"05_demo": card})
    with pytest.raises(rc.ClaimError, match="interval low -0.07 is above high -0.09"):
        rc.bind(claim(), {"05_demo": card})


def test_lookup_walks_nested_names_with_dots():
    assert rc.lookup(CARD, "metrics.ablation.LS 0.1.val_bleu") == 4.2
    assert rc.lookup(CARD, "params.seeds") == 3
    with pytest.raises(KeyError):
        rc.lookup(CARD, "metrics.ablation.LS 0.2.val_bleu")


@pytest.mark.parametrize("entry, message", [
    (claim(better="smaller"), "better must be 'lower' or 'higher'"),
    (claim(metric=None), r"missing fields \['metric'\]"),
    (claim(verdict="ahead"), r"unknown fields \['verdict'\]"),  # a verdict is never typed
    (claim(ours={"label": "m"}), "ours needs exactly one of key or ratio"),
    (claim(ours={"label": "m", "ratio": True}), "only the baseline can be"),
    (claim(interval={"low": "metrics.gap_low"}), "interval needs the keys low and high"),
    (claim(interval={"low": "metrics.gap_low", "high": "metrics.gap_high", "envelope": "yes"}),
     "optionally envelope: true"),
    (claim(interval={"low": "metrics.gap_low", "high": "metrics.gap_high", "seeds": 6}),
     "optionally envelope: true"),
])
def test_claims_file_is_checked(tmp_path, entry, message):
    import yaml

    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump([entry]), encoding="utf-8")
    with pytest.raises(rc.ClaimError, match=message):
        rc.load_claims(path)


ZH = {"claim": "模型对比基线。", "metric": "测试集 MAE", "ours": "模型", "baseline": "基线"}


@pytest.mark.parametrize("zh, message", [
    ({k: v for k, v in ZH.items() if k != "metric"}, "zh needs exactly the texts"),
    ({**ZH, "verdict": "领先"}, "zh needs exactly the texts"),
    ({**ZH, "ours": "  "}, "each non-empty"),
    ("模型对比基线", "zh needs exactly the texts"),
    ({**ZH, "names": ["岭回归"]}, "optionally names"),
    ({**ZH, "names": {"ridge": ""}}, "optionally names"),
])
def test_chinese_text_of_a_claim_is_checked(tmp_path, zh, message):
    import yaml

    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump([claim(zh=zh)], allow_unicode=True), encoding="utf-8")
    with pytest.raises(rc.ClaimError, match=message):
        rc.load_claims(path)  # checked in the English build too


def test_a_claim_without_chinese_stops_only_the_chinese_edition(tmp_path):
    import yaml

    path = tmp_path / "claims.yml"
    path.write_text(yaml.safe_dump([claim()]), encoding="utf-8")
    assert rc.load_claims(path) and rc.load_claims(path, "en")
    with pytest.raises(rc.ClaimError, match=r"claim 1 \(05_demo\): no 'zh' text, which the "
                       r"zh_CN edition needs"):
        rc.load_claims(path, "zh_CN")
    path.write_text(yaml.safe_dump([claim(zh=ZH)], allow_unicode=True), encoding="utf-8")
    r = rc.bind(rc.load_claims(path, "zh_CN")[0], {"05_demo": CARD}, "zh_CN")
    assert (r.claim, r.metric, r.ours.label, r.baseline.label) == \
        (ZH["claim"], ZH["metric"], ZH["ours"], ZH["baseline"])
    assert (r.ours.value, r.verdict) == (0.79, "ahead")


def test_every_language_has_every_template_with_the_same_placeholders():
    import string

    def fields(template):
        return sorted(f for _, f, _, _ in string.Formatter().parse(template) if f)

    english = rf.TEXTS["en"]
    for language, templates in rf.TEXTS.items():
        assert set(templates) == set(english), (
            language, sorted(set(english) ^ set(templates)))
        for key, template in templates.items():
            assert fields(template) == fields(english[key]), (language, key, template)
            assert number_differences(english[key], template) == ([], []), (language, key)
    assert rf.language_key("zh_CN") == "zh" and rf.language_key(None) == "en"
    with pytest.raises(ValueError, match="no texts for language 'fr'.*TEXTS in "
                       "book/_ext/results_format.py"):
        rf.texts("fr")


def test_chinese_spacing_of_assembled_text():
    assert rf.tidy("06 · 梯度提升 对比 岭回归", "zh_CN") == "06 · 梯度提升对比岭回归"
    assert rf.tidy("2 个进程（DDP） 对比 1 个进程", "zh_CN") == "2 个进程（DDP）对比 1 个进程"
    assert rf.tidy("06 · Transformer 对比 MLP", "zh_CN") == "06 · Transformer 对比 MLP"
    assert rf.tidy("a 对比 b", "en") == "a 对比 b"


# --------------------------------------------------------------------------- verdicts
@pytest.mark.parametrize("low, high, better, verdict", [
    (-0.07, -0.03, "lower", "ahead"),
    (0.03, 0.07, "lower", "behind"),
    (-0.02, 0.03, "lower", "inconclusive"),
    (0.0, 0.03, "lower", "inconclusive"),  # an end at 0 is inside
    (0.03, 0.07, "higher", "ahead"),
    (-0.07, -0.03, "higher", "behind"),
])
def test_verdict_with_an_interval(low, high, better, verdict):
    r = row(low, high, better=better)
    assert r.verdict == verdict
    assert ("contains 0" in r.basis) == (verdict == "inconclusive")


def test_an_envelope_over_bootstrap_seeds_is_worded_as_one(tmp_path):
    """An interval bound with `envelope: true` spans several bootstrap seeds' intervals: the
    verdict is computed as for one interval, and the basis and gap say what it is."""
    import yaml

    path = tmp_path / "claims.yml"
    entry = claim(interval={"low": "metrics.gap_low", "high": "metrics.gap_high",
                            "envelope": True}, zh=ZH)
    path.write_text(yaml.safe_dump([entry], allow_unicode=True), encoding="utf-8")
    (tmp_path / "05_demo.json").write_text(json.dumps(CARD), encoding="utf-8")
    r = rc.bind_all(path, tmp_path)[0]
    assert r.envelope and r.verdict == "ahead"
    assert r.basis == "the gap's 95% interval excludes 0 with every bootstrap seed"
    assert "over bootstrap seeds span [-0.07, -0.03]" in rc.gap_text(r)
    assert "每个自助法随机种子" in rc.basis_text(r, "zh_CN")
    spanning = row(-0.01, 0.02)
    spanning.envelope = True
    assert spanning.verdict == "inconclusive"
    assert spanning.basis == "the gap's 95% intervals over several bootstrap seeds together span 0"
    assert not row(-0.07, -0.03).envelope  # a plain interval unless the claim says so


def test_a_timing_says_it_rests_on_repeats_not_on_an_interval():
    r = row()
    r.ours.repeats = 4
    assert r.basis == "no interval: medians over 4 interleaved repeats of one run"
    assert "4 次交错重复" in rc.basis_text(r, "zh_CN")
    r.ours.repeats = 1
    assert r.basis == "no interval: single run"


def test_verdict_without_an_interval_only_compares_and_says_so():
    assert row().verdict == "better" and row(ours=0.9).verdict == "worse"
    assert row(better="higher").verdict == "worse"
    assert row(ours=0.84).verdict == "equal"
    assert row().basis == "no interval: single run"
    assert row(seeds=3).basis == "no interval for the gap: means over 3 seeds"


def test_verdicts_and_numbers_in_chinese():
    assert rc.verdict_text(row(-0.07, -0.03), "zh_CN") == "领先"
    assert rc.verdict_text(row(-0.02, 0.03), "zh_CN") == "无定论"
    assert rc.basis_text(row(-0.02, 0.03), "zh_CN") == "差值的 95% 区间包含 0"
    assert rc.basis_text(row(seeds=3), "zh_CN") == "差值没有区间：3 个随机种子的均值"
    assert rc.gap_text(row(-0.07, -0.03), "zh_CN") == "差值 -0.05，95% 区间 [-0.07, -0.03]"
    assert rc.gap_text(row(-0.07, -0.03)) == "gap -0.05, 95% interval [-0.07, -0.03]"
    side = rc.Side("模型", 0.79, "k", spread=0.01, seeds=3)
    assert rc.side_detail(side, "zh_CN") == "\u00b1 0.01（标准差），3 个随机种子的均值"
    assert rc.side_value(rc.Side("无缓存", 1.0), "zh_CN") == "1（按定义）"


def test_ratio_baseline_is_one_by_definition():
    entry = claim(ours={"label": "cache", "key": "metrics.speedup"}, better="higher",
                  baseline={"label": "no cache", "ratio": True}, interval=None)
    r = rc.bind(entry, {"05_demo": CARD})
    assert (r.baseline.value, r.baseline.key, r.verdict) == (1.0, None, "better")
    assert rc.side_value(r.baseline) == "1 (by definition)"


# --------------------------------------------------------------------------- the figure
def test_figure_rows_are_times_better():
    items = rc.figure_rows([row(-0.07, -0.03), row(better="higher", ours=2.0, base=1.0),
                            row(ours=-1.8, base=-1.7)])
    lower, higher, negative = items
    assert lower["ratio"] == pytest.approx(0.84 / 0.79)  # lower is better: base / ours
    # the interval of the gap, as where ours could lie: base + [low, high]
    assert lower["interval"] == pytest.approx((0.84 / 0.81, 0.84 / 0.77))
    assert lower["verdict"] == "ahead"
    assert higher["ratio"] == 2.0 and higher["verdict"] == "better (no interval)"
    assert negative["ratio"] is None  # a ratio of log-probabilities means nothing


def test_draw_makes_an_svg_with_every_claim(close_figures):
    rows = [row(-0.07, -0.03), row(-0.02, 0.03), row(ours=1e-4, base=0.9),
            row(better="higher", ours=0.5, base=1.0), row(ours=-1.8, base=-1.7)]
    svg = rc.draw(rows).decode("utf-8")
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg
    assert "inconclusive" in svg and "ahead" in svg and "values not positive" in svg
    assert "9,000" in svg  # a ratio beyond the axis is written out
    assert rc.draw(rows) == rc.draw(rows)  # the same bytes at every build (fixed hash salt)
    zh = rc.draw(rows, language="zh_CN").decode("utf-8")
    assert "无定论" in zh and "领先" in zh and "数值不为正" in zh and "好 9,000\u00d7" in zh
    assert "inconclusive" not in zh and "better" not in zh


# --------------------------------------------------------------------------- in Sphinx
def _site(tmp_path: Path, claims: list[dict], cards: list[dict], language: str = "en") -> Path:
    import yaml

    src = tmp_path / "src"
    (src / "book" / "results").mkdir(parents=True)
    (src / "book" / "claims.yml").write_text(yaml.safe_dump(claims, allow_unicode=True),
                                             encoding="utf-8")
    for card in cards:
        (src / "book" / "results" / f"{card['notebook']}.json").write_text(json.dumps(card))
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        f"extensions = ['results_table']\nlanguage = {language!r}\n")
    (src / "index.rst").write_text("Results\n=======\n\n.. results-claims::\n\n"
                                   ".. results-seeds::\n\n.. results-table::\n\n"
                                   ".. results-table::\n   :path: book/results/gpu\n")
    return src


def _build(src: Path, tmp_path: Path, builder: str = "html") -> str:
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    out = tmp_path / builder
    with docutils_namespace():  # each build registers its nodes and directives afresh
        app = Sphinx(str(src), str(src), str(out), str(tmp_path / "doctrees"), builder,
                     status=None, warning=None, freshenv=True, warningiserror=True)
        app.build()
    page = "index.pot" if builder == "gettext" else "index.html"
    return (out / page).read_text(encoding="utf-8")


def test_directives_build_a_page_with_table_and_figure(tmp_path, close_figures):
    page = _build(_site(tmp_path, [claim()], [CARD]), tmp_path)
    assert 'class="results-table results-claims' in page
    assert "data:image/svg+xml;base64," in page
    assert "ahead" in page and "0.79" in page and "0.84" in page
    assert "05_demo (seeds = 3)" in page


def test_the_chinese_page_is_generated_in_chinese(tmp_path, close_figures):
    source = rc.source_hash(claim())  # zh.source, as in book/claims.yml: read, not shown
    page = _build(_site(tmp_path, [claim(zh={**ZH, "source": source})], [CARD],
                        language="zh_CN"), tmp_path)
    assert source not in page
    for text in ("模型对比基线。", "测试集 MAE，越低越好", "领先", "差值的 95% 区间不包含 0",
                 "差值 -0.05，95% 区间 [-0.07, -0.03]", "3 个随机种子的均值", "章节", "结论",
                 "05_demo（seeds = 3）", "cpu 上用时 10 秒", "这里还没有结果卡片",
                 'alt="表中每项比较里'):
        assert text in page, text
    assert "0.79" in page and "0.84" in page
    for english in ("ahead", "lower is better", "Verdict", "No results cards", "seeds (", "gap "):
        assert english not in page, english


def test_no_generated_text_goes_into_the_catalogue(tmp_path, close_figures):
    """The gettext build of the page extracts its title and nothing the directives generate
    (tables, verdicts, numbers, the seed sentence, the figure's alt text and caption)."""
    from babel.messages.pofile import read_po

    pot = _build(_site(tmp_path, [claim(zh=ZH)], [CARD]), tmp_path, builder="gettext")
    import io

    assert [m.id for m in read_po(io.StringIO(pot)) if m.id] == ["Results"]


def test_a_renamed_metric_stops_the_build(tmp_path):
    bad = claim(ours={"label": "model", "key": "metrics.mae_old_name"})
    with pytest.raises(rc.ClaimError, match=r"chapter 05_demo: our number key "
                       r"'metrics.mae_old_name'"):
        _build(_site(tmp_path, [bad], [CARD]), tmp_path)
