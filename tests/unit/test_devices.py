"""An input on another device than its model raises the course's own error, naming both
devices and the fix, before PyTorch's message. Tested on the CPU: the model (or the input)
is moved to the ``meta`` device, which has shapes but no data.

With a CUDA GPU (``make test-gpu``), the same checks run with the model on ``cuda``."""

import pytest
import torch
from torch import nn

from course_lib import decoding, gpt, runtime, seq2seq, tabular
from course_lib import timeseries as ts


def other_devices():
    """(model device, input device) pairs that differ: meta always, CUDA when present."""
    pairs = [("meta", "cpu"), ("cpu", "meta")]
    if torch.cuda.is_available():
        pairs += [("cuda", "cpu"), ("cpu", "cuda")]
    return pairs


DEVICE_PAIRS = pytest.mark.parametrize("model_on, input_on", other_devices())


def expect_mismatch(model_on, input_on):
    """The course's error, naming both devices (cuda appears as cuda:0)."""
    return pytest.raises(runtime.DeviceMismatchError,
                         match=rf"on {input_on}.*the model is on {model_on}.*\.to\(device\)")


def test_model_device_and_check_device_basics():
    assert runtime.model_device(nn.Linear(2, 2)) == torch.device("cpu")
    assert runtime.model_device(nn.ReLU()) is None  # nothing to compare with: no check
    runtime.check_device(nn.ReLU(), "ReLU", x=torch.zeros(1, device="meta"))
    runtime.check_device(nn.Linear(2, 2), "Linear", x=torch.zeros(1, 2), y=None, n=3)
    with pytest.raises(runtime.DeviceMismatchError, match="Linear: x is on meta but the model "
                       "is on cpu"):
        runtime.check_device(nn.Linear(2, 2), "Linear", x=torch.zeros(1, 2, device="meta"))
    assert issubclass(runtime.DeviceMismatchError, ValueError)


def _gpt():
    torch.manual_seed(0)
    return gpt.GPT(gpt.GPTConfig(vocab_size=11, max_len=8, d_model=16, num_heads=2,
                                 num_layers=1, d_ff=32, dropout=0.0, pad_id=None))


def _fix_parts(model_on, input_on):
    if "cuda" in (model_on, input_on):
        model_on = model_on.replace("cuda", "cuda:0")
        input_on = input_on.replace("cuda", "cuda:0")
    return model_on, input_on


@DEVICE_PAIRS
def test_gpt_forward_cached_and_decoding(model_on, input_on):
    model = _gpt().to(model_on)
    tokens = torch.tensor([[1, 2, 3]], device=input_on)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model(tokens)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model.forward_cached(tokens)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model.attention_maps(tokens)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        decoding.greedy_decode(model.step_fn(), tokens, max_new_tokens=2)


@DEVICE_PAIRS
def test_seq2seq_forward_and_decode(model_on, input_on):
    torch.manual_seed(0)
    model = seq2seq.Seq2SeqTransformer(13, d_model=16, num_heads=2, num_encoder_layers=1,
                                       num_decoder_layers=1, d_ff=32, max_len=16).to(model_on)
    src = torch.tensor([[4, 5, 6]], device=input_on)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model(src, src)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model.encode(src)


@DEVICE_PAIRS
@pytest.mark.parametrize("name", ts.FORECASTERS)
def test_forecasters(name, model_on, input_on):
    model = ts.build_forecaster(name, {"size": 8, "layers": 1, "dropout": 0.0}, n_features=3,
                                temp_index=0, num_heads=2, window=6).to(model_on)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model(torch.zeros(2, 6, 3, device=input_on))


@DEVICE_PAIRS
def test_tabular_models(model_on, input_on):
    model = tabular.TabularTransformer(2, [3], d_model=8, num_heads=2, num_layers=1)
    model.to(model_on)
    x_num = torch.zeros(2, 2, device=input_on)
    x_cat = torch.zeros(2, 1, dtype=torch.long, device=input_on)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        model(x_num, x_cat)
    mlp = tabular.MLPRegressor(4, hidden=8).to(model_on)
    with expect_mismatch(*_fix_parts(model_on, input_on)):
        mlp(torch.zeros(2, 4, device=input_on))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (make test-gpu)")
def test_on_cuda_the_same_device_runs():
    model = _gpt().to("cuda")
    tokens = torch.tensor([[1, 2, 3]], device="cuda")
    assert model(tokens).device.type == "cuda"
    out = decoding.greedy_decode(model.step_fn(), tokens, max_new_tokens=2)
    assert out.shape == (1, 5) and out.device.type == "cuda"
