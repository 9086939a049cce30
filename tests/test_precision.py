"""course_lib.precision: choosing bf16/fp16/fp32, autocast, the backward step, the card field."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import gpt, precision, results, runtime, training
from course_lib.precision import Precision, choose, cpu_supports_bf16

FLAGS = "processor\t: 0\nflags\t\t: fpu sse sse2 avx2 avx512f {extra}\nbogomips\t: 4000\n"


@pytest.fixture(autouse=True)
def _restore_current():
    saved = precision._CURRENT
    yield
    precision._CURRENT = saved


# --------------------------------------------------------------------------- detection
@pytest.mark.parametrize("extra, flags, expected", [
    ("avx512_bf16", {"avx512_bf16"}, False),  # the dot-product instruction alone: no speed-up
    ("avx512_bf16 amx_bf16 amx_tile", {"avx512_bf16", "amx_bf16"}, True),
    ("avx512_vnni", set(), False), ("", set(), False)])
def test_cpu_supports_bf16_needs_amx(tmp_path, monkeypatch, extra, flags, expected):
    monkeypatch.setattr(precision.platform, "system", lambda: "Linux")
    info = tmp_path / "cpuinfo"
    info.write_text(FLAGS.format(extra=extra))
    assert precision.cpu_bf16_flags(info) == flags
    assert cpu_supports_bf16(info) is expected


def test_cpu_supports_bf16_is_false_without_cpuinfo(tmp_path, monkeypatch):
    monkeypatch.setattr(precision.platform, "system", lambda: "Linux")
    assert cpu_supports_bf16(tmp_path / "missing") is False
    monkeypatch.setattr(precision.platform, "system", lambda: "Darwin")
    info = tmp_path / "cpuinfo"
    info.write_text(FLAGS.format(extra="amx_bf16"))
    assert cpu_supports_bf16(info) is False  # only Linux flags are read
    assert precision.cpu_bf16_flags(info) == set()


# --------------------------------------------------------------------------- choose
@pytest.mark.parametrize("supported, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_on_cpu_follows_the_hardware(monkeypatch, supported, expected):
    monkeypatch.delenv("COURSE_PRECISION", raising=False)
    monkeypatch.setattr(precision, "cpu_supports_bf16", lambda: supported)
    mp = choose("cpu")
    assert (mp.name, mp.device_type) == (expected, "cpu")
    assert mp.enabled is (expected != "fp32")


def test_auto_on_mps_is_fp32(monkeypatch):
    monkeypatch.delenv("COURSE_PRECISION", raising=False)
    assert choose(torch.device("mps")).name == "fp32"


def test_environment_overrides_auto(monkeypatch):
    monkeypatch.setattr(precision, "cpu_supports_bf16", lambda: True)
    monkeypatch.setenv("COURSE_PRECISION", "FP32")
    assert choose("cpu").name == "fp32"
    monkeypatch.setenv("COURSE_PRECISION", "bf16")
    assert choose("cpu").name == "bf16"
    assert choose("cpu", "fp32").name == "fp32", "an explicit name beats the environment"


@pytest.mark.parametrize("bad", ["half", "float32", "", "bf32"])
def test_unknown_precision_names_the_choices(bad):
    with pytest.raises(ValueError, match="unknown precision.*auto, fp32, bf16, fp16"):
        choose("cpu", bad)


def test_precision_name_must_be_a_string():
    with pytest.raises(TypeError, match="precision must be a string"):
        choose("cpu", torch.bfloat16)


def test_low_precision_on_mps_is_refused():
    with pytest.raises(ValueError, match="not supported on Apple MPS.*'fp32'"):
        choose(torch.device("mps"), "bf16")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_auto_on_cuda_is_bf16_or_fp16():
    assert choose("cuda", "auto").name in ("bf16", "fp16")


def test_precision_rejects_auto_and_unknown_names():
    with pytest.raises(ValueError, match="unknown precision"):
        Precision("auto")
    with pytest.raises(ValueError, match="unknown precision"):
        Precision("int8")


# --------------------------------------------------------------------------- autocast
def test_fp32_autocast_changes_nothing():
    mp = Precision("fp32")
    lin = nn.Linear(8, 8)
    x = torch.randn(4, 8)
    with mp.autocast():
        y = lin(x)
    assert y.dtype == torch.float32 and mp.dtype == torch.float32 and not mp.enabled
    assert mp.scaler is None


def test_bf16_autocast_runs_linear_layers_in_bf16_and_the_loss_in_fp32():
    mp = Precision("bf16", "cpu")
    lin = nn.Linear(8, 5)
    x = torch.randn(4, 8)
    with mp.autocast():
        logits = lin(x)
        loss = F.cross_entropy(logits, torch.zeros(4, dtype=torch.long))
    assert logits.dtype == torch.bfloat16
    assert loss.dtype == torch.float32
    assert lin.weight.dtype == torch.float32, "the weights themselves stay float32"


def _tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return gpt.GPT(gpt.GPTConfig(vocab_size=50, max_len=16, d_model=32, num_heads=2, num_layers=2,
                                 d_ff=64, dropout=0.0, pad_id=0))


def test_bf16_forward_is_close_to_fp32():
    """Stated tolerance: bf16 keeps 8 significant bits, so logits agree to a few 1e-2."""
    model = _tiny_gpt().eval()
    tokens = torch.randint(1, 50, (4, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(tokens)
        with Precision("bf16").autocast():
            low = model(tokens)
    assert low.dtype == torch.bfloat16
    scale = ref.abs().max().item()
    assert (low.float() - ref).abs().max().item() < 0.05 * scale
    assert not torch.equal(low.float(), ref), "autocast was not active"


def _train(mp, steps=40):
    model = _tiny_gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(2)
    data = torch.randint(1, 50, (64, 17), generator=gen)
    data[:, 1::2] = data[:, 0::2][:, :8]  # a learnable pattern: every other token repeats
    losses = []
    for step in range(steps):
        batch = data[(step * 16) % 64:(step * 16) % 64 + 16]
        with mp.autocast():
            loss = model.loss(batch)
        opt.zero_grad()
        mp.step(loss, opt, model.parameters(), clip_grad_norm=1.0)
        losses.append(loss.item())
    return model, losses


def test_bf16_training_tracks_fp32_training():
    """Same model, same data, 40 steps: the final losses agree within 3 %."""
    _, ref = _train(Precision("fp32"))
    _, low = _train(Precision("bf16"))
    assert ref[-1] < ref[0] - 0.5, "the tiny model should learn"
    assert math.isclose(low[-1], ref[-1], rel_tol=0.03), (low[-1], ref[-1])


def test_fp16_uses_a_grad_scaler_and_trains():
    mp = Precision("fp16", "cpu")
    assert isinstance(mp.scaler, torch.amp.GradScaler)
    _, losses = _train(mp, steps=20)
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]


def test_step_without_parameters_cannot_clip():
    model = nn.Linear(3, 1)
    loss = model(torch.randn(2, 3)).sum()
    with pytest.raises(ValueError, match="clip_grad_norm needs the parameters"):
        Precision("bf16").step(loss, torch.optim.SGD(model.parameters(), lr=0.1),
                               clip_grad_norm=1.0)


def test_fit_with_precision_trains_and_validates():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    x = torch.randn(128, 4)
    y = x.sum(1, keepdim=True)
    loader = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 128, 32)]
    hist = training.fit(model, loader, loader, loss_fn=nn.MSELoss(), epochs=15,
                        optimizer=torch.optim.Adam(model.parameters(), lr=1e-2),
                        precision=Precision("bf16"), show_progress=False, clip_grad_norm=5.0)
    assert hist["val_loss"].iloc[-1] < 0.2 * hist["val_loss"].iloc[0]
    val_fp32 = training.evaluate(model, loader, nn.MSELoss())
    val_bf16 = training.evaluate(model, loader, nn.MSELoss(), precision=Precision("bf16"))
    assert val_bf16 == pytest.approx(val_fp32, rel=0.1, abs=1e-2)


# --------------------------------------------------------------------------- setup and cards
def test_setup_prints_and_remembers_the_precision(capsys, monkeypatch):
    monkeypatch.setattr(precision, "cpu_supports_bf16", lambda: True)
    monkeypatch.delenv("COURSE_PRECISION", raising=False)
    monkeypatch.setenv("COURSE_THREADS", "1")
    runtime.setup(seed=0, device="cpu", precision="auto")
    assert "precision: bf16" in capsys.readouterr().out
    assert precision.current().name == "bf16"
    runtime.setup(seed=0, device="cpu")  # default: the notebook trains in float32
    assert "precision: fp32" in capsys.readouterr().out
    assert precision.current().card_name == "float32"


def test_setup_rejects_a_bad_precision(monkeypatch):
    monkeypatch.setenv("COURSE_THREADS", "1")
    with pytest.raises(ValueError, match="unknown precision"):
        runtime.setup(seed=0, device="cpu", precision="double")


def test_set_current_needs_a_precision():
    with pytest.raises(TypeError, match="expected a Precision"):
        precision.set_current("bf16")


def test_current_defaults_to_fp32():
    precision._CURRENT = None
    assert precision.current().name == "fp32"


def test_card_records_the_precision():
    args = dict(profile="full", seed=0, device="cpu", wall_seconds=1.0, params={},
                metrics={"x": 1.0})
    precision.set_current(Precision("bf16"))
    assert results.make_card("nb", **args)["precision"] == "bf16 autocast"
    assert results.make_card("nb", **args, precision="float32")["precision"] == "float32"
    assert "precision" in results.card_table(results.make_card("nb", **args)).index


def test_gpu_profile_card_goes_to_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    results.write_card("zz_gpu", profile="gpu", seed=0, device="cpu", wall_seconds=1.0, params={},
                       metrics={"x": 1.0})
    assert (tmp_path / "gpu" / "zz_gpu.json").is_file()
    assert not (tmp_path / "zz_gpu.json").exists()
