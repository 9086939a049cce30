"""course_lib.checks: the shared argument checks and the file hash, and who uses them."""

import hashlib

import numpy as np
import pytest

from course_lib import checks


@pytest.mark.parametrize("value", [1, 7, np.int64(3)])
def test_positive_int_accepts_integers_from_one(value):
    checks.positive_int("n", value)


@pytest.mark.parametrize("value", [0, -2, 1.0, 2.5, True, "3", None])
def test_positive_int_rejects_the_rest_naming_the_argument(value):
    with pytest.raises(ValueError, match=r"^n must be a positive int, got "):
        checks.positive_int("n", value)


@pytest.mark.parametrize("value", [1, 0.5, 2.0])
def test_positive_number_accepts_finite_positives(value):
    checks.positive_number("factor", value)


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), True, "1"])
def test_positive_number_rejects_the_rest(value):
    with pytest.raises(ValueError, match=r"^factor must be a positive number, got "):
        checks.positive_number("factor", value)


def test_file_sha256_is_the_hash_of_the_bytes(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"attention")
    assert checks.file_sha256(path) == hashlib.sha256(b"attention").hexdigest()
    assert checks.file_sha256(str(path), chunk=2) == checks.file_sha256(path)


def test_the_modules_share_one_check():
    from course_lib import positional, seq2seq_tools

    assert positional._positive_int is checks.positive_int
    assert seq2seq_tools.positive_int is checks.positive_int
