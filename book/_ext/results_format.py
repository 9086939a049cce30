"""What both tables of the results page share: one number format, one row builder, and the
words of every sentence the page generates, in each language of the book.

``results_table`` (every card) and ``results_claims`` (the claims against their baselines)
both take them from here. The dependencies run one way: ``results_table`` imports
``results_claims`` (its ``setup`` registers the claims directives too), and both import this
module, which imports neither.

The page's generated text (tables, verdicts, the sentence on seeds, the figure) changes with
every run, so it must not become messages of the gettext catalogue (a catalogue message per
number would go stale at each re-run). Its few fixed words are templates here, one set per
language, chosen from Sphinx's ``language`` (``texts``); numbers are filled in by ``fmt``, the
same in every language. Every node the directives return is marked untranslatable
(``untranslatable``), so the gettext build extracts none of it. The claims' own words are in
book/claims.yml (the ``zh`` field of each claim).
"""

from __future__ import annotations

import math
import re

from docutils import nodes

# The words of the generated text, by language (the key of ``language_key``). Placeholders in
# braces are filled by ``str.format``; every language has exactly the keys of "en" (tested).
TEXTS: dict[str, dict[str, str]] = {
    "en": {
        # results-table
        "col_chapter": "Chapter", "col_run": "Run", "col_params": "Parameters",
        "col_metrics": "Metrics",
        "seconds": "{n} s", "minutes": "{n} min",
        "run_on": "{time} on {device}",
        "torch_seed": "torch {torch}, seed {seed}",
        "precision": "precision: {precision}",
        "profile": " ({profile} profile)",
        "pair": "{name}: ",
        "no_cards": "No results cards here yet: {how} writes them to {where}/.",
        "no_cards_gpu": "a run of the gpu profile on a GPU machine",
        "no_cards_full": "a full run of a chapter notebook (make full)",
        # results-claims: the table
        "col_claim": "Claim", "col_ours": "Ours", "col_baseline": "Baseline",
        "col_verdict": "Verdict",
        "named_label": "{label}: {name}",
        "metric_lower": "{metric}, lower is better",
        "metric_higher": "{metric}, higher is better",
        "no_claims": "No claims in {name} yet.",
        "verdict_ahead": "ahead", "verdict_behind": "behind",
        "verdict_inconclusive": "inconclusive",
        "verdict_better": "better", "verdict_worse": "worse", "verdict_equal": "equal",
        "basis_contains": "the 95% interval of the gap contains 0",
        "basis_excludes": "the 95% interval of the gap excludes 0",
        "basis_contains_envelope": "the gap's 95% intervals over several bootstrap seeds "
                                   "together span 0",
        "basis_excludes_envelope": "the gap's 95% interval excludes 0 with every bootstrap "
                                   "seed",
        "basis_seeds": "no interval for the gap: means over {seeds} seeds",
        "basis_single": "no interval: single run",
        "basis_repeats": "no interval: medians over {repeats} interleaved repeats of one run",
        "by_definition": "{value} (by definition)",
        "spread": "\u00b1 {spread} (sd)",
        "mean_of_seeds": "mean of {seeds} seeds",
        "list_sep": ", ",
        "gap": "gap {gap}",
        "gap_interval": ", 95% interval [{low}, {high}]",
        "gap_interval_envelope": ", 95% intervals over bootstrap seeds span [{low}, {high}]",
        # results-claims: the figure
        "fig_no_interval": "{verdict} (no interval)",
        "fig_label": "{chapter} \u00b7 {ours} vs {baseline}",
        "fig_not_positive": "  values not positive: see the table",
        "fig_times_better": "{ratio}\u00d7 better",
        "fig_xlabel": "how much better than the baseline (0 = equal)",
        "fig_alt": "For each comparison in the table, how much better than its baseline our "
                   "number is, in percent",
        "fig_caption": (
            "Every comparison of the table on one axis: how much better than its baseline "
            "our number is, in percent (ours over the baseline's, minus one, where higher is "
            "better; the baseline's over ours, minus one, where lower is better). The scale is "
            "linear within a few percent of 0 and logarithmic beyond, so that a gap of half a "
            "percent and a speed-up of several times both stay readable; a triangle at the "
            "right edge marks a ratio beyond the axis. Whiskers: the spread of our number over "
            "seeds, where the card has one. Light blue bar: the 95% interval of the gap (or the "
            "span of such intervals over several bootstrap seeds, where the table says so), "
            "where the card has one; a bar that crosses 0 is inconclusive. Drawn from the cards "
            "when the book is built."),
        # results-seeds
        "seeds_one": "Every card records seed {seed} as its run's seed",
        "seeds_many": "The cards record seeds {seeds}",
        "seeds_only_one": "{first}; no card records more than one seed.",
        "seeds_several": ("{first}. Most numbers come from one training run; these cards "
                          "record models trained from several seeds, and say so under "
                          "params: {cards}."),
        "seeds_card": "{name} ({key} = {value})",
        "seeds_sep": "; ",
    },
    "zh": {
        "col_chapter": "章节", "col_run": "运行", "col_params": "参数",
        "col_metrics": "指标",
        "seconds": "{n} 秒", "minutes": "{n} 分钟",
        "run_on": "{device} 上用时 {time}",
        "torch_seed": "torch {torch}，随机种子 {seed}",
        "precision": "精度：{precision}",
        "profile": "（{profile} 运行配置）",
        "pair": "{name}: ",
        "no_cards": "这里还没有结果卡片：{how}时会把卡片写入 {where}/。",
        "no_cards_gpu": "在 GPU 机器上以 gpu 运行配置运行",
        "no_cards_full": "以 full 运行配置完整运行一章的笔记本（make full）",
        "col_claim": "比较", "col_ours": "我们的方法", "col_baseline": "基线",
        "col_verdict": "结论",
        "named_label": "{label}：{name}",
        "metric_lower": "{metric}，越低越好",
        "metric_higher": "{metric}，越高越好",
        "no_claims": "{name} 中还没有任何比较。",
        "verdict_ahead": "领先", "verdict_behind": "落后", "verdict_inconclusive": "无定论",
        "verdict_better": "更好", "verdict_worse": "更差", "verdict_equal": "相等",
        "basis_contains": "差值的 95% 区间包含 0",
        "basis_excludes": "差值的 95% 区间不包含 0",
        "basis_contains_envelope": "差值在多个自助法随机种子下的 95% 区间合起来覆盖 0",
        "basis_excludes_envelope": "差值的 95% 区间在每个自助法随机种子下都不包含 0",
        "basis_seeds": "差值没有区间：{seeds} 个随机种子的均值",
        "basis_single": "没有区间：单次运行",
        "basis_repeats": "没有区间：同一次运行中 {repeats} 次交错重复的中位数",
        "by_definition": "{value}（按定义）",
        "spread": "\u00b1 {spread}（标准差）",
        "mean_of_seeds": "{seeds} 个随机种子的均值",
        "list_sep": "，",
        "gap": "差值 {gap}",
        "gap_interval": "，95% 区间 [{low}, {high}]",
        "gap_interval_envelope": "，多个自助法随机种子下的 95% 区间合起来覆盖 [{low}, {high}]",
        "fig_no_interval": "{verdict}（无区间）",
        "fig_label": "{chapter} \u00b7 {ours} 对比 {baseline}",
        "fig_not_positive": "  数值不为正：见上表",
        "fig_times_better": "好 {ratio}\u00d7",
        "fig_xlabel": "比基线好多少（0 = 相等）",
        "fig_alt": "表中每项比较里，我们的数值比其基线好多少（百分比）",
        "fig_caption": (
            "表中所有比较画在同一条轴上：我们的数值比其基线好多少，以百分比表示（越高越好时为"
            "我们的数值除以基线的数值再减一；越低越好时为基线的数值除以我们的数值再减一）。"
            "刻度在 0 附近几个百分点之内是线性的，之外是对数的，因此半个百分点的差距和数倍的"
            "加速都清晰可读；右边缘的三角形表示比值超出了坐标轴。误差线：我们的数值在多个随机种子"
            "之间的离散程度（卡片中有此项时）。浅蓝色条：差值的 95% 区间（表中注明时，为多个自助法"
            "随机种子下这些区间合起来覆盖的范围；卡片中有此项时）；"
            "跨过 0 的条表示无定论。此图在构建本书时根据结果卡片绘制。"),
        "seeds_one": "每张卡片都记录随机种子 {seed} 为其运行的随机种子",
        "seeds_many": "各卡片记录的随机种子为 {seeds}",
        "seeds_only_one": "{first}；没有卡片记录多于一个随机种子。",
        "seeds_several": ("{first}。大多数数值来自一次训练运行；以下卡片记录了用多个随机种子"
                          "训练的模型，并在 params 中注明：{cards}。"),
        "seeds_card": "{name}（{key} = {value}）",
        "seeds_sep": "；",
    },
}


def language_key(language: str | None) -> str:
    """The key of ``TEXTS`` (and of a claim's translated text) for Sphinx's ``language``:
    ``None``, ``"en"`` and ``"en_US"`` give ``"en"``, ``"zh_CN"`` gives ``"zh"``."""
    key = (language or "en").replace("-", "_").split("_")[0].lower()
    if key not in TEXTS:
        raise ValueError(f"the results page has no texts for language {language!r}: add a "
                         f"{key!r} entry to TEXTS in book/_ext/results_format.py (and a "
                         f"{key!r} text to every claim in book/claims.yml)")
    return key


def texts(language: str | None) -> dict[str, str]:
    """The templates of ``TEXTS`` for Sphinx's ``language``."""
    return TEXTS[language_key(language)]


_CJK = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"  # CJK punctuation, ideographs, full-width
_CJK_SPACE = re.compile(rf"(?<=[{_CJK}])[ ]+(?=[{_CJK}])|(?<=[\u3000-\u303f\uff00-\uffef])[ ]+"
                        rf"|[ ]+(?=[\u3000-\u303f\uff00-\uffef])")


def tidy(text: str, language: str | None) -> str:
    """Chinese spacing for a text assembled from parts: no space between two Chinese
    characters or next to full-width punctuation (one space stays between Chinese and Latin
    letters or digits). Other languages are returned unchanged."""
    if language_key(language) != "zh":
        return text
    return _CJK_SPACE.sub("", text)


def untranslatable(node_list: list[nodes.Node]) -> list[nodes.Node]:
    """Mark every text element in ``node_list`` as not to be translated by gettext.

    Sphinx extracts the text of any element that has a source (the directive's nodes get
    the page's) into the page's catalogue; generated text, which is already in the page's
    language and changes with every run, must stay out of it.
    """
    for node in node_list:
        for element in node.findall(nodes.TextElement):
            element["translatable"] = False
    return node_list


def fmt(value) -> str:
    """Numbers with four significant digits, integers with thousands separators."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}" if abs(value) >= 1000 else f"{value:g}"
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return str(value)


def table_row(cells: list[nodes.Node]) -> nodes.row:
    """One table row, one entry per node."""
    row = nodes.row()
    for content in cells:
        entry = nodes.entry()
        entry += content
        row += entry
    return row
