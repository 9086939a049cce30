"""Tests of course_lib.data: shapes and quirks of every dataset, checksums, error messages."""

from __future__ import annotations

import hashlib
import shutil
import socket

import pandas as pd
import pytest

from course_lib import data
from course_lib.runtime import data_dir

LOADERS = {  # loader -> one file it needs
    "beijing": (data.load_beijing, "beijing_pm25/PRSA_data_2010.1.1-2014.12.31.csv"),
    "ames": (data.load_ames, "ames_housing/AmesHousing.csv"),
    "imdb": (lambda: data.load_imdb("test"), "imdb/imdb_test_00.csv.gz"),
    "multi30k": (lambda: data.load_multi30k("val"), "multi30k/val.de.gz"),
    "cmn_eng": (data.load_cmn_eng, "cmn_eng/cmn.txt"),
}


# --------------------------------------------------------------------------- checksums
def test_sha256_table_matches_sha256sums_file():
    lines = (data_dir() / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    listed = dict(reversed(line.split(maxsplit=1)) for line in lines if line.strip())
    assert data.SHA256 == listed


def test_verify_all_passes_on_the_shipped_data():
    report = data.verify_all()
    assert list(report.columns) == ["file", "bytes", "ok", "problem"]
    assert len(report) == len(data.SHA256) == 24
    assert report["ok"].all(), report[~report["ok"]]
    assert report.set_index("file").loc["imdb/README", "bytes"] == 4037


def test_sha256_of_hashes_each_file_once(tmp_path, monkeypatch):
    path = tmp_path / "f.txt"
    path.write_bytes(b"attention")
    calls = []
    real = data.file_sha256
    monkeypatch.setattr(data, "file_sha256", lambda p: calls.append(p) or real(p))
    expected = hashlib.sha256(b"attention").hexdigest()
    assert data.sha256_of(path) == data.sha256_of(str(path)) == expected
    assert len(calls) == 1
    path.write_bytes(b"attention!")  # new size (and mtime): hashed again
    assert data.sha256_of(path) == hashlib.sha256(b"attention!").hexdigest()
    assert len(calls) == 2


def test_repeated_loads_do_not_rehash(monkeypatch):
    data.load_ames()
    monkeypatch.setattr(data, "file_sha256", lambda p: pytest.fail(f"hashed {p} again"))
    assert len(data.load_ames()) == 2930


# --------------------------------------------------------------------------- loaders
def test_beijing():
    df = data.load_beijing()
    assert df.shape == (43_824, 14)
    assert df.columns[0] == "datetime"
    assert list(df.columns[1:]) == [
        "No",
        "year",
        "month",
        "day",
        "hour",
        "pm2.5",
        "DEWP",
        "TEMP",
        "PRES",
        "cbwd",
        "Iws",
        "Is",
        "Ir",
    ]
    assert df["pm2.5"].isna().sum() == 2_067
    assert df.drop(columns="pm2.5").notna().all().all()
    assert df["pm2.5"].iloc[:24].isna().all()  # all of 2010-01-01 is missing
    steps = df["datetime"].diff().dropna()
    assert (steps == pd.Timedelta(hours=1)).all()  # sorted, contiguous, no gaps
    assert df["datetime"].iloc[0] == pd.Timestamp("2010-01-01 00:00")
    assert df["datetime"].iloc[-1] == pd.Timestamp("2014-12-31 23:00")
    assert isinstance(df["cbwd"].dtype, pd.CategoricalDtype)
    assert df["cbwd"].value_counts().to_dict() == {
        "SE": 15_290,
        "NW": 14_150,
        "cv": 9_387,
        "NE": 4_997,
    }
    assert set(data.BEIJING_COLUMNS) == set(df.columns)


def test_ames():
    df = data.load_ames()
    assert df.shape == (2_930, 82)
    assert (df["Alley"] == "NA").sum() == 2_732  # "NA" = no alley access, kept as a string
    assert df["Alley"].isna().sum() == 0
    assert all((df[c] == "NA").any() for c in data.AMES_NA_MEANS_NONE)
    assert df["Lot Frontage"].isna().sum() == 490  # true missing values are NaN
    assert (df["Mas Vnr Type"] == "None").sum() == 1_752
    assert df["PID"].iloc[0] == "0526301100"  # leading zeros kept
    assert df["MS SubClass"].iloc[0] == "020"
    assert "WD " not in set(df["Sale Type"]) and (df["Sale Type"] == "WD").sum() == 2_536
    assert "WD " in set(data.load_ames(strip_sale_type=False)["Sale Type"])
    assert data.ames_outliers(df).sum() == 5
    trimmed = data.load_ames(drop_outliers=True)
    assert len(trimmed) == 2_925 and trimmed["Gr Liv Area"].max() <= 4000


def test_imdb_train():
    df = data.load_imdb("train")
    assert df.shape == (25_000, 6)
    assert list(df.columns) == ["id", "rating", "sentiment", "movie_id", "review", "split"]
    assert not df["review"].str.contains("<br", regex=False).any()
    assert df["sentiment"].value_counts().to_dict() == {"negative": 12_500, "positive": 12_500}
    assert not df.duplicated(["sentiment", "id"]).any()
    assert df["movie_id"].str.match(r"tt\d+$").all()
    assert (df["split"] == "train").all()


def test_imdb_all_and_raw():
    df = data.load_imdb("all", clean=False)
    assert len(df) == 50_000 and df["split"].value_counts().to_dict() == {
        "train": 25_000,
        "test": 25_000,
    }
    assert df["review"].str.contains("<br />", regex=False).sum() == 14_665 + 14_535
    overlap = set(df.loc[df.split == "train", "movie_id"]) & set(
        df.loc[df.split == "test", "movie_id"]
    )
    assert len(overlap) <= 1  # movie-disjoint by design (SOURCE.md: one stray title id)
    assert data.clean_review(" a<br /><br /> b <BR>c<br/>") == "a b c"
    with pytest.raises(ValueError, match="split"):
        data.load_imdb("validation")


@pytest.mark.parametrize("split, n", [("train", 29_000), ("val", 1_014), ("test", 1_000)])
def test_multi30k_counts_and_alignment(split, n):
    de, en = data.load_multi30k(split)
    assert len(de) == len(en) == n
    assert all(isinstance(s, str) and s and s == s.strip() for s in de + en)


def test_multi30k_quirks():
    de, en = data.load_multi30k("train")
    assert (de[0], en[0]) == (
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        "Two young, White males are outside near many bushes.",
    )
    assert not any("&amp;" in s for s in de + en)
    raw_de, raw_en = data.load_multi30k("train", unescape=False, strip=False)
    assert sum("&amp;" in s for s in raw_en) == 16 and sum("&amp;" in s for s in raw_de) == 1
    assert sum(s != s.rstrip() for s in raw_de) == 40
    assert data.load_multi30k("test_2016_flickr") == data.load_multi30k("test")
    with pytest.raises(ValueError, match="split"):
        data.load_multi30k("dev")


def test_cmn_eng():
    df = data.load_cmn_eng()
    assert df.shape == (28_447, 3) and list(df.columns) == ["en", "zh", "attribution"]
    assert df.iloc[0].tolist()[:2] == ["Hi.", "嗨。"]
    assert df["attribution"].str.startswith("CC-BY 2.0 (France)").all()
    assert not df["zh"].str.contains("\u200b").any()
    assert data.load_cmn_eng(remove_zero_width=False)["zh"].str.count("\u200b").sum() == 10


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("name", LOADERS)
def test_missing_file_names_it_and_says_how_to_restore(name, tmp_path, monkeypatch):
    load, relpath = LOADERS[name]
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataFileMissingError) as info:
        load()
    assert isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    assert str(tmp_path / relpath) in message
    assert f"git checkout -- data/{relpath}" in message
    assert "COURSE_DATA_DIR" in message and "Colab" in message


def test_corrupt_file_fails_its_checksum(tmp_path, monkeypatch):
    relpath = "ames_housing/AmesHousing.csv"
    copy = tmp_path / relpath
    copy.parent.mkdir(parents=True)
    shutil.copyfile(data_dir() / relpath, copy)
    raw = bytearray(copy.read_bytes())
    raw[1000] ^= 0x01  # flip one bit of one byte
    copy.write_bytes(bytes(raw))
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataChecksumError) as info:
        data.load_ames()
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "checksum does not match" in message
    assert str(copy) in message
    assert data.SHA256[relpath] in message
    assert hashlib.sha256(bytes(raw)).hexdigest() in message
    assert f"git checkout -- data/{relpath}" in message
    report = data.verify_all().set_index("file")
    assert report.loc[relpath, "problem"] == "checksum mismatch"
    assert report.loc["cmn_eng/cmn.txt", "problem"] == "missing"
    assert not report["ok"].any()


def test_data_file_returns_a_checked_path_and_rejects_unknown_names(tmp_path, monkeypatch):
    path = data.data_file("imdb/README")
    assert path == data_dir() / "imdb/README" and path.is_file()
    with pytest.raises(KeyError, match="not a course data file"):
        data.data_file("imdb/readme.txt")
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataFileMissingError):
        data.data_file("imdb/README")


# --------------------------------------------------------------------------- offline
def test_never_touches_the_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("course_lib.data tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(data, "_HASH_CACHE", {})  # hash again, with the network cut
    assert data.verify_all()["ok"].all()
    for load, _ in LOADERS.values():
        load()


def test_one_sha256_helper_for_data_files_and_search_tables(tmp_path):
    from course_lib import checks, tuning

    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 5000)  # 1.28 MB: two chunks of 1 MiB
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert checks.file_sha256(path) == expected
    assert tuning.file_sha256 is checks.file_sha256 and data.file_sha256 is checks.file_sha256
    assert data.sha256_of(path) == expected
