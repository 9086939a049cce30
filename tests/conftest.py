"""Shared test settings: one CPU thread (the machine may be shared) and a headless matplotlib."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture
def close_figures():
    """Close every matplotlib figure a test opened."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")
