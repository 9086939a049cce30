"""The small checks the other modules share: sizes that must be positive, and a file's SHA-256.

    positive_int("d_model", d_model)        # ValueError: d_model must be a positive int, got 0
    positive_number("factor", factor)       # the same for a float (finite, above 0)
    file_sha256(path)                       # '9f86d081884c7d65...': the hex digest of its bytes

They live here so that a module shows its idea first and its guard rails in one line each, and
so that every module words the same mistake the same way. This module imports nothing else from
``course_lib``: any module may use it.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
from pathlib import Path


def positive_int(name: str, value) -> None:
    """Raise ``ValueError`` ("<name> must be a positive int, got <value>") unless ``value`` is
    an integer >= 1. A Python or NumPy integer counts; a bool does not (``True`` is not a size)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def positive_number(name: str, value) -> None:
    """Raise ``ValueError`` ("<name> must be a positive number, got <value>") unless ``value``
    is a finite int or float above 0 (not a bool)."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def file_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, as hex (read in chunks of ``chunk`` bytes)."""
    digest = hashlib.sha256()
    with open(Path(path), "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
