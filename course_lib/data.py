"""One loader per dataset in ``data/``; each checks the file's sha256 first and never downloads.

=================  ====================================  =========================================
loader             dataset                               returns
=================  ====================================  =========================================
``load_beijing``   UCI Beijing PM2.5, hourly 2010-2014   DataFrame, 43,824 rows, sorted by time
``load_ames``      Ames Housing (De Cock 2011)           DataFrame, 2,930 x 82
``load_imdb``      IMDB Large Movie Review v1.0          DataFrame, 25,000 per split
``load_multi30k``  Multi30k Task 1, German-English       (de_list, en_list), 29,000/1,014/1,000
``load_cmn_eng``   Tatoeba English-Chinese pairs         DataFrame, 28,447 rows
=================  ====================================  =========================================

``load_pretrained_gpt()`` returns chapter 7's pretrained GPT, ``data/pretrained/gpt_imdb.pt``,
which ``scripts/pretrain_gpt.py`` made (its card: ``book/results/pretrain/gpt_imdb.json``);
``load_pretrained_encoder()`` chapter 12's masked-LM encoder, ``data/pretrained/encoder_imdb.pt``
(``scripts/pretrain_encoder.py``; card ``book/results/pretrain/encoder_imdb.json``).

The files live in ``runtime.data_dir()`` (``$COURSE_DATA_DIR`` if set, else ``data/`` in the
repository). Their expected sha256 sums are in ``SHA256`` below, the same as ``data/SHA256SUMS``.
Before a loader reads a file it hashes it (once per process: the result is cached by path,
size and modification time) and raises

- ``DataFileMissingError`` (a ``FileNotFoundError``) when the file is not there, and
- ``DataChecksumError`` (a ``ValueError``) when its bytes are not the ones the course ships,

each naming the file and saying how to restore it. ``verify_all()`` checks every file at once.
Each dataset's ``SOURCE.md`` gives its citation, license and provenance.
"""

from __future__ import annotations

import gzip
import html
import os
import re
from pathlib import Path

import pandas as pd

from course_lib.checks import file_sha256
from course_lib.runtime import data_dir

__all__ = [
    "SHA256",
    "BEIJING_COLUMNS",
    "AMES_NA_MEANS_NONE",
    "DataFileMissingError",
    "DataChecksumError",
    "sha256_of",
    "data_file",
    "verify_all",
    "load_beijing",
    "load_ames",
    "ames_outliers",
    "clean_review",
    "load_imdb",
    "load_multi30k",
    "load_cmn_eng",
    "load_pretrained_gpt",
]

# --------------------------------------------------------------------------- the files
# Every file the course ships, relative to the data folder -> its sha256 (= data/SHA256SUMS).
SHA256: dict[str, str] = {
    "ames_housing/AmesHousing.csv": "65a1cbb89c2b58b11674097135dd04e710df5db726bcfe6ec551de38b44e4911",
    "ames_housing/DataDocumentation.txt": "c834a3e4c37c7a75e2fac5b4eeb0f9c4002c0848752cdc02eb42b8eb6215a704",
    "beijing_pm25/PRSA_data_2010.1.1-2014.12.31.csv": "4127f868775e31b3956522adc0ec75af8937dde6a3896e8beed3a376c6d27f1c",
    "cmn_eng/cmn.txt": "3a8ac6cb8cdaab6e235d3075ec3680084044d975882d6139c903bf7893097ff6",
    "imdb/README": "a69bd3b91235c7fa1d6aadab51e257b7fa3f7b68f32b607483a72bd67f95e557",
    "imdb/imdb_test_00.csv.gz": "840f02ff71e102bec3f14cbfb6db65ce70112291738d849f112321cff74321d4",
    "imdb/imdb_test_01.csv.gz": "115c71bbce09fb248c8e6527185c77be6efafef2bb3a25d3032a52a56ecd8197",
    "imdb/imdb_test_02.csv.gz": "147d7ea745a73c3435da4422eb5cb42d40ac15d2206a190edeefa198e9591348",
    "imdb/imdb_test_03.csv.gz": "85e5c58549dd7e06eeeec7b5676462bb7215a4252f7587b3a88e806602ad2dbf",
    "imdb/imdb_test_04.csv.gz": "5c83315937439d4e24736ef3e3fdccd115b49dc92f4e55f62ec14ea3ad447546",
    "imdb/imdb_train_00.csv.gz": "9b41f866ed3203c2fcc844584056101999da062b88bb177dabc3afb70e4b8e33",
    "imdb/imdb_train_01.csv.gz": "bc8fa01d9fc005ab7ab08f137fcd7509bda408618941b9b7cf441e2731a61a88",
    "imdb/imdb_train_02.csv.gz": "3cb583ba4dee9deedf2b2138389a9ac86e40836960a16410b3f3a1698d2f8be4",
    "imdb/imdb_train_03.csv.gz": "b13893a0127314245d93e923cb3566d06e032f35c0b3892a6bf9847c2a77d6cf",
    "imdb/imdb_train_04.csv.gz": "a94ba7e3421b0dd6225938c7348c9762b6d8fe8116b478963b02ff345df49cd2",
    "multi30k/test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "multi30k/test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "multi30k/train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "multi30k/train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "multi30k/val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "multi30k/val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "pretrained/gpt_imdb.pt": "096e340cf7c4c190ef5423b605f19bbeeb05cb321e19ffe049e53cecc047d819",
    "pretrained/encoder_imdb.pt": "366a576a2385c274f317fa830b105944a8b989cf45022e7cf55a9c5fdc0016e6",
    "pretrained/forecasters_05.pt": "0471cb0a37685b70802348ba3117bb1ca6423843d5d111da1c0fea87dcf38c3d",
}

BEIJING_FILE = "beijing_pm25/PRSA_data_2010.1.1-2014.12.31.csv"
AMES_FILE = "ames_housing/AmesHousing.csv"
CMN_FILE = "cmn_eng/cmn.txt"
IMDB_SPLITS = ("train", "test")
MULTI30K_SPLITS = {
    "train": "train",
    "val": "val",
    "test": "test_2016_flickr",
    "test_2016_flickr": "test_2016_flickr",
}


# --------------------------------------------------------------------------- errors
def _restore_hint(relpath: str) -> str:
    env = os.environ.get("COURSE_DATA_DIR")
    where = f"now {env!r}" if env else "now unset, so the repository's data/ is used"
    return (
        "The course never downloads data. To restore the file:\n"
        f"  - in a git checkout of the course, from its root: git checkout -- data/{relpath}\n"
        "  - or set COURSE_DATA_DIR to a folder holding an intact copy of the course's data/ "
        f"({where})\n"
        "  - on Colab, re-run the notebook's first cell, which fetches the course and its data.\n"
        + ("  - or make it again: python scripts/pretrain_gpt.py --stage train (about an hour "
           "on 2 CPU cores; the weights then differ in their last bits, and so does the "
           "sha256 to put in course_lib.data.SHA256 and data/SHA256SUMS)\n"
           if relpath.startswith("pretrained/") else "")
        + "Check every file with course_lib.data.verify_all(), or `sha256sum -c SHA256SUMS` "
        "in the data folder."
    )


class DataFileMissingError(FileNotFoundError):
    """A dataset file is not in the data folder. The message says how to restore it."""

    def __init__(self, path: Path, relpath: str):
        self.path = Path(path)
        self.relpath = relpath
        super().__init__(f"data file not found: {self.path}\n{_restore_hint(relpath)}")


class DataChecksumError(ValueError):
    """A dataset file's sha256 is not the expected one (corrupt, truncated or edited)."""

    def __init__(self, path: Path, relpath: str, expected: str, actual: str):
        self.path, self.relpath = Path(path), relpath
        self.expected, self.actual = expected, actual
        super().__init__(
            f"sha256 checksum does not match for data file {self.path}\n"
            f"  expected: {expected}\n"
            f"  actual:   {actual}\n"
            "The file is corrupt, truncated or was edited. (On Windows, a git with "
            "core.autocrlf=true may have rewritten its line endings.)\n"
            f"{_restore_hint(relpath)}"
        )


# --------------------------------------------------------------------------- hashing
_HASH_CACHE: dict[tuple[str, int, int], str] = {}


def sha256_of(path: str | os.PathLike) -> str:
    """The sha256 (hex) of a file (``checks.file_sha256``), computed once per process per
    (path, size, mtime): a chapter that loads a dataset twice hashes it once."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _HASH_CACHE:
        _HASH_CACHE[key] = file_sha256(path)
    return _HASH_CACHE[key]


def data_file(relpath: str) -> Path:
    """The path of one course data file (e.g. ``"imdb/README"``), after checking its sha256."""
    if relpath not in SHA256:
        raise KeyError(f"{relpath!r} is not a course data file; known files: {sorted(SHA256)}")
    path = data_dir() / relpath
    if not path.is_file():
        raise DataFileMissingError(path, relpath)
    actual = sha256_of(path)
    if actual != SHA256[relpath]:
        raise DataChecksumError(path, relpath, SHA256[relpath], actual)
    return path


def verify_all() -> pd.DataFrame:
    """Check every data file; one row per file: ``file``, ``bytes``, ``ok``, ``problem``.

    Never raises for a bad file: ``ok`` is False and ``problem`` says ``"missing"`` or
    ``"checksum mismatch"`` (``bytes`` is <NA> for a missing file).
    """
    rows = []
    for relpath, expected in SHA256.items():
        path = data_dir() / relpath
        if not path.is_file():
            rows.append((relpath, pd.NA, False, "missing"))
            continue
        ok = sha256_of(path) == expected
        rows.append((relpath, path.stat().st_size, ok, "" if ok else "checksum mismatch"))
    df = pd.DataFrame(rows, columns=["file", "bytes", "ok", "problem"])
    df["bytes"] = df["bytes"].astype("Int64")
    return df


# --------------------------------------------------------------------------- Beijing PM2.5
BEIJING_COLUMNS: dict[str, str] = {
    "datetime": "timestamp (local time, hourly) built from year, month, day, hour",
    "No": "row number in the original file, 1..43824",
    "year": "year, 2010..2014",
    "month": "month, 1..12",
    "day": "day of month",
    "hour": "hour of day, 0..23",
    "pm2.5": "PM2.5 concentration (ug/m^3), US Embassy; 2,067 missing (NaN), incl. all of "
    "2010-01-01; longest gap 155 hours",
    "DEWP": "dew point (deg C), airport; no gaps",
    "TEMP": "temperature (deg C), airport; no gaps",
    "PRES": "pressure (hPa), airport; no gaps",
    "cbwd": "combined wind direction: NE, NW, SE, cv (calm and variable); categorical",
    "Iws": "cumulated wind speed (m/s): a running total that grows while cbwd stays the same "
    "and (almost always) resets when it changes; not an hourly amount",
    "Is": "cumulated hours of snow: a running count of snowy hours in a row",
    "Ir": "cumulated hours of rain: a running count of rainy hours in a row",
}


def load_beijing() -> pd.DataFrame:
    """UCI Beijing PM2.5 data: 43,824 hourly rows, 2010-01-01 00:00 to 2014-12-31 23:00.

    Columns (``BEIJING_COLUMNS`` describes each): ``datetime`` (added, first), then the
    original ``No, year, month, day, hour, pm2.5, DEWP, TEMP, PRES, cbwd, Iws, Is, Ir``.
    Rows are sorted by ``datetime`` (the file already is) and the index is 0..43823; the
    series is contiguous, one row per hour, with no gaps.

    Quirks:
      - ``pm2.5`` is the only column with missing values: the literal ``NA`` in the file
        becomes NaN (2,067 of them, 4.7%). TEMP, DEWP and PRES are complete, so every
        72-hour window is a valid input for forecasting the temperature of hour 73.
      - ``cbwd`` is a pandas categorical with categories ``NE, NW, SE, cv``.
      - ``Iws``, ``Is``, ``Ir`` are cumulative running totals, not per-hour amounts; take
        differences within a run of equal ``cbwd`` (Iws) if an hourly amount is wanted.
      - The file has CRLF line endings; pandas handles them.
    """
    path = data_file(BEIJING_FILE)
    df = pd.read_csv(path, keep_default_na=False, na_values={"pm2.5": ["NA"]})
    df["cbwd"] = pd.Categorical(df["cbwd"], categories=["NE", "NW", "SE", "cv"])
    df.insert(0, "datetime", pd.to_datetime(df[["year", "month", "day", "hour"]]))
    return df.sort_values("datetime", kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- Ames
# Columns in which the string "NA" is a category ("no alley", "no basement", ...), not a gap.
AMES_NA_MEANS_NONE = (
    "Alley",
    "Bsmt Qual",
    "Bsmt Cond",
    "Bsmt Exposure",
    "BsmtFin Type 1",
    "BsmtFin Type 2",
    "Fireplace Qu",
    "Garage Type",
    "Garage Finish",
    "Garage Qual",
    "Garage Cond",
    "Pool QC",
    "Fence",
    "Misc Feature",
)


def ames_outliers(df: pd.DataFrame) -> pd.Series:
    """Boolean mask of De Cock's 5 houses with ``Gr Liv Area`` over 4000 sq ft.

    De Cock (2011) recommends removing them before teaching use: three are partial sales
    that do not reflect market value, two are simply very large houses. ``df[~ames_outliers(df)]``
    drops them.
    """
    return df["Gr Liv Area"] > 4000


def load_ames(drop_outliers: bool = False, strip_sale_type: bool = True) -> pd.DataFrame:
    """Ames Housing (De Cock 2011): 2,930 sales in Ames, Iowa, 2006-2010, 82 columns.

    Columns keep De Cock's names (``Gr Liv Area``, ``SalePrice``, ...); ``Order`` is 1..2930
    and ``SalePrice`` the target. ``data/ames_housing/DataDocumentation.txt`` describes them.

    Quirks, and what this loader does about them:
      - ``"NA"`` is a real category meaning "none" in the 14 columns of
        ``AMES_NA_MEANS_NONE`` (``Alley``: 2,732 houses have no alley access). The file is read
        with ``keep_default_na=False, na_values=['']``, so ``"NA"`` stays a string and only
        empty fields (true missing values: ``Lot Frontage`` 490, ``Garage Yr Blt`` 159, ...)
        become NaN. This also keeps the string ``"None"`` in ``Mas Vnr Type`` (1,752 rows),
        which pandas' defaults would turn into NaN too.
      - ``PID`` (``"0526301100"``) and ``MS SubClass`` (``"020"``) are codes with leading
        zeros: they are read as strings.
      - ``Sale Type`` has the value ``"WD "`` with a trailing space (2,536 rows). With
        ``strip_sale_type=True`` (default) it becomes ``"WD"``; no other value has spaces.
      - De Cock's 5 houses over 4000 sq ft are **kept** by default; ``drop_outliers=True``
        removes them (2,925 rows left, index reset), or use ``ames_outliers(df)``.
    """
    path = data_file(AMES_FILE)
    df = pd.read_csv(
        path, keep_default_na=False, na_values=[""], dtype={"PID": str, "MS SubClass": str}
    )
    if strip_sale_type:
        df["Sale Type"] = df["Sale Type"].str.strip()
    if drop_outliers:
        df = df[~ames_outliers(df)].reset_index(drop=True)
    return df


# --------------------------------------------------------------------------- IMDB
_BR = re.compile(r"\s*(?:<br\s*/?>\s*)+", flags=re.IGNORECASE)


def clean_review(text: str) -> str:
    """Replace each run of HTML line breaks (``<br />``, ``<br/>``, ``<br>``) by one space.

    Whitespace around the breaks and around the text is stripped.
    """
    if "<br />" in text:  # the only spelling in IMDB; str.split is ~20x faster than a regex
        text = " ".join(s for part in text.split("<br />") if (s := part.strip()))
    if "<" in text:  # other spellings (<br>, <BR/>), for text from elsewhere
        text = _BR.sub(" ", text)
    return text.strip()


def load_imdb(split: str = "train", clean: bool = True) -> pd.DataFrame:
    """IMDB reviews (Maas et al. 2011): 25,000 labelled reviews per split, 50,000 for ``"all"``.

    Columns: ``id, rating, sentiment, movie_id, review, split``.
      - ``id`` restarts at 0 for each (split, sentiment): only ``(split, sentiment, id)`` is
        unique.
      - ``rating`` is the star rating: 1-4 for ``negative``, 7-10 for ``positive``.
      - ``movie_id`` is the IMDb title id (``tt0453418``). Train and test are movie-disjoint
        by design; build validation sets grouped by ``movie_id`` (at most 30 reviews a
        movie) so that no movie is in both.
      - Each split is balanced, 12,500 positive and 12,500 negative; rows come in the shards'
        order (train before test for ``"all"``), index 0..n-1.

    ``clean=True`` (default) applies ``clean_review``: every run of ``<br />`` tags in
    ``review`` (in about 58% of reviews) becomes one space, and surrounding whitespace is
    stripped; ``clean=False`` gives the original text. Left as
    they are either way: a handful of other tags (``<i>``, ``<p>``, ``<spoiler>``), a few
    HTML entities (``&#8230;``), non-ASCII characters, and duplicate reviews (96 extra copies
    in train, 199 in test, 123 texts in both splits).
    """
    splits = IMDB_SPLITS if split == "all" else (split,)
    if split != "all" and split not in IMDB_SPLITS:
        raise ValueError(f"unknown IMDB split {split!r}: use 'train', 'test' or 'all'")
    frames = []
    for name in splits:
        for shard in range(5):
            path = data_file(f"imdb/imdb_{name}_{shard:02d}.csv.gz")
            frame = pd.read_csv(path, dtype={"movie_id": str, "sentiment": str, "review": str})
            frame["split"] = name
            frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    if clean:
        df["review"] = [clean_review(text) for text in df["review"]]
    return df


# --------------------------------------------------------------------------- Multi30k
def _read_lines_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
        text = f.read()
    # split on "\n" only: str.splitlines() would also break on rare Unicode separators
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def load_multi30k(
    split: str = "train", unescape: bool = True, strip: bool = True
) -> tuple[list[str], list[str]]:
    """Multi30k Task 1 German-English captions as ``(de, en)``: two aligned lists of strings.

    ``split``: ``"train"`` (29,000 pairs), ``"val"`` (1,014) or ``"test"`` (1,000; the WMT16
    ``test_2016_flickr`` set; that name is accepted too). ``de[i]`` translates to ``en[i]``.
    Text is raw: not tokenised, not lower-cased.

    Quirks (the files are the original 2018 ``master`` version, which most papers use):
      - ``unescape=True`` (default) decodes HTML entities with ``html.unescape``. Only the
        training set has any: ``&amp;`` in 16 English lines and 1 German line, while the other
        German lines write a bare ``&``. The repository's later ``fixes`` branch makes the same
        change. ``unescape=False`` keeps ``&amp;`` exactly as in the files.
      - ``strip=True`` (default) strips surrounding whitespace: 40 German training lines end
        in a space. ``strip=False`` keeps it.
      - The ``fixes`` branch's other corrections (``they 're``, a truncated ``adult'``) are
        not applied; some captions have no final period.
    """
    name = MULTI30K_SPLITS.get(split)
    if name is None:
        raise ValueError(f"unknown Multi30k split {split!r}: use 'train', 'val' or 'test'")
    de = _read_lines_gz(data_file(f"multi30k/{name}.de.gz"))
    en = _read_lines_gz(data_file(f"multi30k/{name}.en.gz"))
    if len(de) != len(en):  # cannot happen with the checked files; guards against edits
        raise ValueError(f"Multi30k {name}: {len(de)} German lines but {len(en)} English lines")
    if unescape:
        de, en = [html.unescape(s) for s in de], [html.unescape(s) for s in en]
    if strip:
        de, en = [s.strip() for s in de], [s.strip() for s in en]
    return de, en


# --------------------------------------------------------------------------- Tatoeba cmn-eng
def load_cmn_eng(remove_zero_width: bool = True) -> pd.DataFrame:
    """Tatoeba / ManyThings English-Mandarin pairs: 28,447 rows, columns ``en, zh, attribution``.

    ``attribution`` (``"CC-BY 2.0 (France) Attribution: tatoeba.org #538123 (CM) & ..."``)
    must be kept or reproduced to meet the CC BY 2.0 FR license.

    Quirks:
      - Some English sentences have several Chinese translations (27,056 distinct English
        sentences); rows are roughly ordered from short to long English.
      - The Chinese mixes Simplified and Traditional script (convert with OpenCC if one
        script is wanted) and has no spaces between words.
      - ``remove_zero_width=True`` (default) deletes the 10 zero-width spaces (U+200B) inside
        Chinese sentences; ``False`` keeps the text exactly as in the file. Three ideographic
        spaces (U+3000) are left alone.
    """
    path = data_file(CMN_FILE)
    with open(path, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows = [line.split("\t") for line in lines]
    df = pd.DataFrame(rows, columns=["en", "zh", "attribution"])
    if remove_zero_width:
        df["zh"] = df["zh"].str.replace("\u200b", "", regex=False)
        df["en"] = df["en"].str.replace("\u200b", "", regex=False)
    return df


# --------------------------------------------------------------------------- pretrained models
PRETRAINED_GPT = "pretrained/gpt_imdb.pt"
PRETRAINED_ENCODER = "pretrained/encoder_imdb.pt"


def load_pretrained_gpt(map_location="cpu"):
    """Chapter 7's pretrained GPT and everything saved with it: ``(model, saved)``.

    ``saved["tokenizer"]`` is the BPE (``text.BPETokenizer.from_json``) whose ids the model
    reads; ``saved["final_val_ppl"]`` its validation perplexity at the end of pretraining.
    The file's sha256 is checked first, like every data file's.
    """
    from .gpt import load  # here, not at the top: gpt needs nothing from data

    return load(data_file(PRETRAINED_GPT), map_location=map_location)


def load_pretrained_encoder(map_location="cpu"):
    """Chapter 12's masked-LM encoder (the GPT's architecture, ``causal=False``): ``(model,
    saved)``, with ``saved["tokenizer"]`` (the GPT's BPE) and ``saved["mask_id"]``."""
    from .gpt import load

    return load(data_file(PRETRAINED_ENCODER), map_location=map_location)
