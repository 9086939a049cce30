"""Unit tests of course_lib.training: fit, evaluate, early stopping, schedulers."""

import math

import pandas as pd
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib import seq2seq, tabular
from course_lib.training import count_parameters, default_batch_loss, evaluate, fit


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("COURSE_PROGRESS", "off")
    torch.manual_seed(0)


def regression_data(n=64, noise=0.0):
    x = torch.randn(n, 3)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.3 + noise * torch.randn(n, 1)
    return x, y


def loader(x, y, batch_size=16, shuffle=False):
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle)


# --------------------------------------------------------------------------- fit
def test_fit_learns_a_linear_regression():
    x, y = regression_data()
    model = nn.Linear(3, 1)
    history = fit(
        model,
        loader(x, y, shuffle=True),
        loader(x, y),
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        epochs=15,
    )
    assert isinstance(history, pd.DataFrame)
    assert list(history.columns) == ["epoch", "train_loss", "val_loss", "lr", "seconds"]
    assert history["epoch"].tolist() == list(range(1, 16))
    assert history["train_loss"].iloc[-1] < 1e-3 * history["train_loss"].iloc[0]
    assert history["val_loss"].iloc[-1] < 1e-4
    assert (history["lr"] == 0.1).all() and (history["seconds"] >= 0).all()
    assert torch.allclose(model.weight, torch.tensor([[1.5, -2.0, 0.5]]), atol=1e-2)


def test_fit_without_val_loader_has_no_val_column():
    x, y = regression_data(16)
    model = nn.Linear(3, 1)
    history = fit(
        model,
        loader(x, y),
        None,
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        epochs=2,
    )
    assert list(history.columns) == ["epoch", "train_loss", "lr", "seconds"]
    assert len(history) == 2


def test_train_loss_is_the_size_weighted_mean_of_batch_losses():
    x, y = regression_data(10)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # no change: the loss is fixed
    history = fit(model, loader(x, y, batch_size=4), None, nn.MSELoss(), opt, epochs=1)
    expected = nn.functional.mse_loss(model(x), y).item()
    assert history["train_loss"].iloc[0] == pytest.approx(expected, rel=1e-5)


class TupleModel(nn.Module):
    """Takes two inputs and returns (prediction, attention weights), as the course's models do."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, a, b):
        return self.lin(a + b), torch.zeros(1)


def test_fit_handles_tuple_inputs_and_tuple_outputs():
    x, y = regression_data(32)
    data = [((x[i : i + 8], torch.zeros(8, 3)), y[i : i + 8]) for i in range(0, 32, 8)]
    model = TupleModel()
    history = fit(
        model, data, data, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), epochs=10
    )
    assert history["val_loss"].iloc[-1] < 0.1 * history["val_loss"].iloc[0]


def test_fit_with_custom_batch_loss():
    x, y = regression_data(32)
    calls = []

    def batch_loss(model, batch, device):
        calls.append(device)
        return ((model(batch["x"]) - batch["y"]) ** 2).mean()

    data = [{"x": x[i : i + 8], "y": y[i : i + 8]} for i in range(0, 32, 8)]
    model = nn.Linear(3, 1)
    history = fit(
        model,
        data,
        None,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        epochs=3,
        batch_loss=batch_loss,
    )
    assert len(calls) == 12 and set(calls) == {"cpu"}
    assert history["train_loss"].iloc[-1] < history["train_loss"].iloc[0]


def diverging_case():
    """Training on y = -x while validating on y = x: the validation loss rises every epoch."""
    x = torch.randn(32, 1)
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    train, val = loader(x, -x, batch_size=32), loader(x, x, batch_size=32)
    return model, train, val


def test_early_stopping_stops_and_restores_the_best_weights():
    model, train, val = diverging_case()
    weights = []

    def batch_loss(model, batch, device):
        if model.training:  # remember the weights at the end of each training epoch
            weights.append(model.weight.item())
        return default_batch_loss(nn.MSELoss())(model, batch, device)

    history = fit(
        model,
        train,
        val,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        epochs=20,
        patience=2,
        batch_loss=batch_loss,
    )
    assert len(history) == 3  # best at epoch 1, then two epochs without improvement
    assert history["val_loss"].is_monotonic_increasing
    best = history["val_loss"].idxmin()
    assert history["epoch"][best] == 1
    assert evaluate(model, val, nn.MSELoss()) == pytest.approx(history["val_loss"][best])
    # the weights after epoch 1 are the ones seen at the start of epoch 2
    assert model.weight.item() == pytest.approx(weights[1])
    assert model.weight.item() != pytest.approx(weights[-1])


def test_without_patience_fit_runs_every_epoch():
    model, train, val = diverging_case()
    history = fit(
        model, train, val, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), epochs=6
    )
    assert len(history) == 6
    assert evaluate(model, val, nn.MSELoss()) == pytest.approx(history["val_loss"].iloc[-1])


def test_min_delta_counts_small_improvements_as_none():
    x, y = regression_data(32)
    model = nn.Linear(3, 1)
    history = fit(
        model,
        loader(x, y),
        loader(x, y),
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.05),
        epochs=10,
        patience=2,
        min_delta=1e6,
    )
    assert len(history) == 3
    assert history["val_loss"].is_monotonic_decreasing


def test_scheduler_is_stepped_per_batch():
    x, y = regression_data(64)
    model = nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.1 / (1 + step))
    history = fit(
        model, loader(x, y, batch_size=16), None, nn.MSELoss(), opt, epochs=3, scheduler=sched
    )
    assert sched.last_epoch == 3 * 4  # 4 batches per epoch
    assert history["lr"].tolist() == pytest.approx([0.1 / (1 + 4 * e) for e in (1, 2, 3)])


def test_clip_grad_norm_limits_each_step():
    x, y = regression_data(16)
    y = y * 1000  # huge gradients
    model = nn.Linear(3, 1)
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    fit(
        model,
        loader(x, y, batch_size=16),
        None,
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=1.0),
        epochs=1,
        clip_grad_norm=0.01,
    )
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert (after - before).norm().item() == pytest.approx(0.01, rel=1e-4)


def test_nan_loss_raises_floating_point_error():
    x, y = regression_data(16)
    y[3] = float("nan")
    model = nn.Linear(3, 1)
    with pytest.raises(FloatingPointError, match="loss became nan at epoch 1"):
        fit(
            model,
            loader(x, y),
            None,
            nn.MSELoss(),
            torch.optim.SGD(model.parameters(), lr=0.1),
            epochs=2,
        )


def test_infinite_loss_raises_floating_point_error():
    x, y = regression_data(16)
    model = nn.Linear(3, 1)
    with pytest.raises(FloatingPointError, match="loss became inf"):
        fit(
            model,
            loader(x, y),
            None,
            lambda out, t: out.sum() * math.inf,
            torch.optim.SGD(model.parameters(), lr=0.1),
            epochs=1,
        )


class TestFitErrors:
    def setup_method(self):
        x, y = regression_data(8)
        self.model = nn.Linear(3, 1)
        self.data = loader(x, y)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def test_missing_optimizer(self):
        with pytest.raises(ValueError, match="optimizer"):
            fit(self.model, self.data, None, nn.MSELoss(), None)

    @pytest.mark.parametrize("epochs", [0, -1, 2.5, "3"])
    def test_bad_epochs(self, epochs):
        with pytest.raises(ValueError, match=f"epochs must be a positive int, got {epochs!r}"):
            fit(self.model, self.data, None, nn.MSELoss(), self.opt, epochs=epochs)

    def test_patience_without_val_loader(self):
        with pytest.raises(ValueError, match="patience.*val_loader"):
            fit(self.model, self.data, None, nn.MSELoss(), self.opt, patience=3)

    def test_missing_loss(self):
        with pytest.raises(ValueError, match="loss_fn.*batch_loss"):
            fit(self.model, self.data, None, None, self.opt)


def test_fit_progress_prints_one_line_in_text_mode(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "text")
    x, y = regression_data(16)
    model = nn.Linear(3, 1)
    fit(
        model,
        loader(x, y),
        None,
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        epochs=3,
        desc="regression",
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("regression") and "3/3" in lines[0]


def test_fit_show_progress_false_prints_nothing(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROGRESS", "text")
    x, y = regression_data(16)
    model = nn.Linear(3, 1)
    fit(
        model,
        loader(x, y),
        None,
        nn.MSELoss(),
        torch.optim.SGD(model.parameters(), lr=0.1),
        epochs=2,
        show_progress=False,
    )
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# --------------------------------------------------------------------------- evaluate
def test_evaluate_is_the_size_weighted_mean():
    x, y = regression_data(7)
    model = nn.Linear(3, 1)
    # batches of 3, 3 and 1: a plain mean of batch means would differ
    value = evaluate(model, loader(x, y, batch_size=3), nn.MSELoss())
    expected = nn.functional.mse_loss(model(x), y).item()
    assert value == pytest.approx(expected, rel=1e-6)
    batch_means = [
        nn.functional.mse_loss(model(x[i : i + 3]), y[i : i + 3]).item() for i in (0, 3, 6)
    ]
    assert value != pytest.approx(sum(batch_means) / 3, rel=1e-3)


def test_evaluate_uses_eval_mode_and_no_grad():
    model = nn.Sequential(nn.Linear(3, 1), nn.Dropout(0.9))
    x, y = regression_data(8)
    modes = []

    def batch_loss(m, batch, device):
        modes.append((m.training, torch.is_grad_enabled()))
        return default_batch_loss(nn.MSELoss())(m, batch, device)

    model.train()
    a = evaluate(model, loader(x, y), batch_loss=batch_loss)
    b = evaluate(model, loader(x, y), batch_loss=batch_loss)
    assert a == b  # dropout is off
    assert set(modes) == {(False, False)}


def test_evaluate_errors():
    x, y = regression_data(8)
    with pytest.raises(ValueError, match="loss_fn or batch_loss"):
        evaluate(nn.Linear(3, 1), loader(x, y))
    with pytest.raises(ValueError, match="no batches"):
        evaluate(nn.Linear(3, 1), [], nn.MSELoss())


def test_default_batch_loss():
    model = nn.Linear(3, 1)
    x, y = regression_data(4)
    loss = default_batch_loss(nn.MSELoss())(model, (x, y), "cpu")
    assert loss.item() == pytest.approx(nn.functional.mse_loss(model(x), y).item())
    assert loss.requires_grad


def test_count_parameters_counts_a_shared_tensor_once_and_skips_frozen_ones():
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied: one 10 x 4 matrix
    model = nn.Sequential(emb, nn.Linear(4, 4), head)
    assert count_parameters(model) == 10 * 4 + (4 * 4 + 4)
    model[1].bias.requires_grad_(False)
    assert count_parameters(model) == 10 * 4 + 4 * 4
    assert tabular.count_parameters is count_parameters is seq2seq.count_parameters
