"""Shared test settings: one CPU thread (the machine may be shared) and a headless matplotlib."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "runs_chapters: runs whole chapter notebooks (the student edition, nbgrader's autograde); "
        "`make test` runs them, the minimum-versions job (`make test-minimum`) leaves them out "
        "and runs its own few chapters instead")


@pytest.fixture
def close_figures():
    """Close every matplotlib figure a test opened."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")
