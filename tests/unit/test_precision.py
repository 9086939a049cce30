"""course_lib.precision: the bf16 probe and its cache, choosing bf16/fp16/fp32, autocast, the
backward step, the card fields."""

import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_lib import gpt, precision, results, runtime, training
from course_lib.precision import BF16_MARGIN, Precision, choose, cpu_supports_bf16, decide

FLAGS = "processor\t: 0\nflags\t\t: fpu sse sse2 avx2 avx512f {extra}\nbogomips\t: 4000\n"
REAL_MEASURE, REAL_BUSY = precision.measure_step_times, precision.machine_busy


class FakeProbe:
    """Stands in for the timing: step times with a chosen bf16 speed-up; counts its calls."""

    def __init__(self):
        self.calls = 0
        self.speedup = 0.71

    def __call__(self, **kwargs):
        self.calls += 1
        fp32 = [0.1, 0.102, 0.098, 0.1, 0.101]
        return fp32, [t / self.speedup for t in fp32]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """Every test: its own cache folder, no smoke profile, no precision from the environment,
    no real timing (the tests that time call REAL_MEASURE), the current precision restored."""
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("COURSE_PROFILE", "COURSE_PRECISION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(precision, "measure_step_times", FakeProbe())
    monkeypatch.setattr(precision, "machine_busy", lambda threads: False)  # a quiet machine
    saved, threads = precision._CURRENT, torch.get_num_threads()
    yield
    precision._CURRENT = saved
    torch.set_num_threads(threads)


@pytest.fixture
def probe():
    """This test's fake timing: set ``probe.speedup``, read ``probe.calls``."""
    return precision.measure_step_times


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
def test_cpu_model_reads_the_model_name(tmp_path, monkeypatch):
    monkeypatch.setattr(precision.platform, "system", lambda: "Linux")
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC  7763 64-Core Processor\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC  7763 64-Core Processor\n")
    assert precision.cpu_model(info) == "AMD EPYC 7763 64-Core Processor"
    monkeypatch.setattr(precision.platform, "processor", lambda: "")
    monkeypatch.setattr(precision.platform, "machine", lambda: "aarch64")
    assert precision.cpu_model(tmp_path / "missing") == "aarch64"  # no name: the architecture


def test_cpu_model_of_this_machine_is_a_name():
    name = precision.cpu_model()
    assert isinstance(name, str) and name.strip() == name and name


# --------------------------------------------------------------------------- the decision
@pytest.mark.parametrize("fp32, bf16, name, speedup", [
    ([1.0] * 5, [0.5] * 5, "bf16", 2.0),          # twice as fast: bf16
    ([0.71] * 3, [1.0] * 3, "fp32", 0.71),        # slower (a Xeon without AMX): fp32
    ([1.10] * 3, [1.0] * 3, "fp32", 1.1),         # faster, but not by a clear margin: fp32
    ([1.149], [1.0], "fp32", 1.149),              # just under the margin
    ([1.15], [1.0], "bf16", 1.15),                # exactly the margin: bf16
])
def test_decide_takes_bf16_only_past_the_margin(fp32, bf16, name, speedup):
    assert BF16_MARGIN == 1.15
    assert decide(fp32, bf16) == (name, speedup)


def test_decide_compares_medians_and_takes_a_margin():
    fp32 = [1.0, 1.0, 1.0, 1.0, 40.0]  # one step hit by another process: the median ignores it
    assert decide(fp32, [0.5, 0.5, 9.0, 0.5, 0.5]) == ("bf16", 2.0)
    assert decide([1.1], [1.0], margin=1.05) == ("bf16", 1.1)
    assert decide([1.0, 3.0], [1.0, 1.0]) == ("bf16", 2.0)  # even count: mean of the middle two


@pytest.mark.parametrize("bad", [[], [0.0], [-1.0], [float("nan")], [1.0, float("inf")]])
def test_decide_rejects_impossible_timings(bad):
    with pytest.raises(ValueError, match="fp32 step times must be a non-empty list of positive"):
        decide(bad, [1.0])
    with pytest.raises(ValueError, match="bf16 step times"):
        decide([1.0], bad)


# --------------------------------------------------------------------------- the probe
def test_measure_step_times_times_interleaved_training_steps():
    """The real probe at toy sizes: one time per round and precision; random state untouched.
    With no time budget left it stops after the 3 rounds a median needs."""
    torch.set_num_threads(1)  # toy steps on 2 threads of a busy machine stall for seconds
    state = torch.get_rng_state()
    fp32, bf16 = REAL_MEASURE(rounds=50, budget_s=0.0, batch=2, length=8, d_model=16, vocab=40,
                              layers=1)
    assert len(fp32) == len(bf16) == 3
    assert all(isinstance(t, float) and t > 0 for t in fp32 + bf16)
    assert torch.equal(torch.get_rng_state(), state), "the probe moved the global random state"
    name, speedup = decide(fp32, bf16)
    assert name in ("fp32", "bf16") and speedup > 0


def test_probe_measures_once_then_reads_the_cache(probe, monkeypatch):
    monkeypatch.setattr(precision, "cpu_model", lambda: "Test CPU 9000")
    torch.set_num_threads(2)
    first = precision.cpu_probe()
    assert (first.source, first.bf16_speedup, first.choice, probe.calls) == (
        "measured", 0.71, "fp32", 1)
    assert (first.cpu, first.threads) == ("Test CPU 9000", 2)
    entry = json.loads(precision.probe_cache_path().read_text())["probes"][
        f"Test CPU 9000 | torch {torch.__version__} | 2 threads"]
    assert entry["bf16_speedup"] == 0.71 and entry["rounds"] == 5
    assert entry["fp32_step_ms"] == 100.0 and entry["threads"] == 2
    again = precision.cpu_probe()
    assert (again.source, again.bf16_speedup, probe.calls) == ("cached", 0.71, 1)
    fresh = precision.cpu_probe(refresh=True)
    assert (fresh.source, probe.calls) == ("measured", 2)


def test_cache_is_keyed_by_cpu_torch_version_and_threads(probe, monkeypatch):
    machine = {"cpu": "CPU A"}
    monkeypatch.setattr(precision, "cpu_model", lambda: machine["cpu"])
    torch.set_num_threads(1)
    assert precision.cpu_probe().source == "measured"
    machine["cpu"], probe.speedup = "CPU B", 1.6
    assert precision.cpu_probe().source == "measured"  # another machine
    torch.set_num_threads(2)
    assert precision.cpu_probe().source == "measured"  # more threads: bf16 may pay differently
    with monkeypatch.context() as m:
        m.setattr(precision.torch, "__version__", "9.9.9")
        assert precision.cpu_probe().source == "measured"  # another torch
    assert probe.calls == 4
    entries = json.loads(precision.probe_cache_path().read_text())["probes"]
    assert len(entries) == 4 and "CPU B | torch 9.9.9 | 2 threads" in entries
    machine["cpu"] = "CPU A"
    torch.set_num_threads(1)
    cached = precision.cpu_probe()  # the first machine's answer is still there
    assert (cached.source, cached.bf16_speedup, probe.calls) == ("cached", 0.71, 4)


@pytest.mark.parametrize("content", [
    b"{not json", b"\xff\xfe\x00garbage", b"", b"[]", b'{"probes": []}',
    b'{"probes": {"KEY": {"bf16_speedup": "fast"}}}',
    b'{"probes": {"KEY": {"bf16_speedup": -1}}}',
    b'{"probes": {"KEY": {"bf16_speedup": true}}}',
    b'{"probes": {"KEY": 0.7}}',
])
def test_a_corrupt_cache_is_measured_again_and_repaired(probe, monkeypatch, content):
    monkeypatch.setattr(precision, "cpu_model", lambda: "Test CPU")
    key = precision.probe_key("Test CPU", torch.get_num_threads())
    path = precision.probe_cache_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(content.replace(b"KEY", key.encode()))
    assert precision.cpu_probe().source == "measured" and probe.calls == 1
    assert json.loads(path.read_text())["probes"][key]["bf16_speedup"] == 0.71
    assert precision.cpu_probe().source == "cached"
    assert not list(path.parent.glob("*.tmp")), "the atomic write left its temporary file"


def test_an_unwritable_cache_still_gives_a_decision(probe, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("COURSE_CACHE_DIR", str(blocker / "cache"))
    assert precision.cpu_probe().source == "measured"
    assert precision.cpu_probe().source == "measured"  # nothing could be cached
    assert probe.calls == 2


def test_a_probe_that_raises_means_fp32_and_is_not_cached(monkeypatch):
    def no_bf16_kernel(**kwargs):
        raise RuntimeError('"addmm_impl_cpu_" not implemented for \'BFloat16\'')

    monkeypatch.setattr(precision, "measure_step_times", no_bf16_kernel)
    mp = choose("cpu", "auto")
    assert (mp.name, mp.probe.source, mp.probe.bf16_speedup) == ("fp32", "failed", None)
    assert "failed" in str(mp.probe) and not precision.probe_cache_path().exists()


def test_a_busy_machine_decides_but_caches_nothing(probe, monkeypatch):
    monkeypatch.setattr(precision, "machine_busy", lambda threads: True)
    first = precision.cpu_probe()
    assert (first.source, first.bf16_speedup, first.busy) == ("measured", 0.71, True)
    assert str(first).endswith("; measured on a busy machine, not cached")
    assert not precision.probe_cache_path().exists()
    assert precision.cpu_probe().source == "measured" and probe.calls == 2


@pytest.mark.parametrize("load, cores, threads, busy", [
    (0.2, 2, 2, False),   # a quiet 2-core machine, both threads
    (1.0, 2, 1, False),   # one core busy, the probe on the other
    (1.0, 2, 2, True),    # one core busy, yet two threads asked for
    (4.5, 2, 1, False),   # one thread is time-sliced, not stalled: both precisions slow alike
    (3.0, 16, 8, False),
    (12.0, 16, 8, True),
])
def test_machine_busy_compares_the_load_with_the_free_cores(monkeypatch, load, cores, threads,
                                                            busy):
    monkeypatch.setattr(precision.os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(precision.os, "cpu_count", lambda: cores)
    assert REAL_BUSY(threads) is busy


def test_smoke_profile_never_measures(probe):
    skipped = precision.cpu_probe(profile="smoke")
    assert (skipped.source, skipped.bf16_speedup, skipped.choice) == ("skipped", None, "fp32")
    assert choose("cpu", "auto", profile="smoke").name == "fp32" and probe.calls == 0
    assert not precision.probe_cache_path().exists(), "a smoke run must not cache anything"
    probe.speedup = 1.5
    precision.cpu_probe()  # a full run measures and caches
    cached = precision.cpu_probe(profile="smoke")
    assert (cached.source, cached.choice, probe.calls) == ("cached", "bf16", 1)


def test_precision_does_not_read_the_profile_from_the_environment(probe, monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    assert precision.cpu_probe().source == "measured" and probe.calls == 1  # profile="full"


def test_setup_passes_the_profile_on_else_reads_the_environment(probe, monkeypatch):
    monkeypatch.setenv("COURSE_THREADS", "1")
    runtime.setup(seed=0, device="cpu", precision="auto", profile="smoke")
    assert precision.current().probe.source == "skipped" and probe.calls == 0
    monkeypatch.setenv("COURSE_PROFILE", "smoke")  # a notebook that does not pass its profile
    runtime.setup(seed=0, device="cpu", precision="auto")
    assert precision.current().probe.source == "skipped" and probe.calls == 0
    runtime.setup(seed=0, device="cpu", precision="auto", profile="full")  # the argument wins
    assert precision.current().probe.source == "measured" and probe.calls == 1


def test_none_means_float32_everywhere(monkeypatch):
    monkeypatch.setenv("COURSE_THREADS", "1")
    monkeypatch.setenv("COURSE_PRECISION", "bf16")  # what "auto" would have followed
    runtime.setup(seed=0, device="cpu", precision=None)
    assert precision.current().name == "fp32"
    precision.set_current(Precision("bf16", "cpu"))
    assert precision.as_precision(None).name == "fp32"
    assert precision.as_precision(None, "cpu").enabled is False
    assert precision.as_precision("current") is precision.current()
    bf16 = Precision("bf16", "cpu")
    assert precision.as_precision(bf16) is bf16
    with pytest.raises(ValueError, match="precision must be None"):
        precision.as_precision("bf16")
    args = dict(profile="full", seed=0, device="cpu", wall_seconds=1.0, params={"p": 1},
                metrics={"m": 1.0})
    assert results.make_card("nb", **args)["precision"] == "bf16 autocast"  # the default
    assert results.make_card("nb", **args, precision=None)["precision"] == "float32"


def test_probe_describes_itself():
    p = precision.Probe("cached", 0.714, "AMD EPYC", 2)
    assert str(p) == "probe: bf16 0.71x the speed of fp32 on AMD EPYC, 2 threads; cached"
    assert str(precision.Probe("measured", 1.5, "X", 1)).endswith("on X, 1 thread; measured")
    assert p.card() == {"bf16_speedup": 0.714, "source": "cached"}
    assert precision.Probe("override").card() == {"bf16_speedup": None, "source": "override"}
    assert "smoke" in str(precision.Probe("skipped"))
    with pytest.raises(ValueError, match="probe source must be one of"):
        precision.Probe("guessed")


# --------------------------------------------------------------------------- choose
@pytest.mark.parametrize("speedup, expected", [(1.6, "bf16"), (0.71, "fp32"), (1.1, "fp32")])
def test_auto_on_cpu_follows_the_probe(probe, speedup, expected):
    probe.speedup = speedup
    mp = choose("cpu")
    assert (mp.name, mp.device_type) == (expected, "cpu")
    assert mp.enabled is (expected != "fp32")
    assert (mp.probe.source, mp.probe.bf16_speedup) == ("measured", speedup)
    assert choose("cpu", "auto").probe.source == "cached" and probe.calls == 1


def test_auto_ignores_the_cpu_flags(probe, monkeypatch):
    monkeypatch.setattr(precision, "cpu_supports_bf16", lambda: True)  # AMX, bf16 measured slow
    assert choose("cpu").name == "fp32"


def test_auto_on_mps_is_fp32(probe):
    mp = choose(torch.device("mps"))
    assert mp.name == "fp32" and mp.probe.source == "not cpu" and probe.calls == 0


def test_environment_overrides_auto(probe, monkeypatch):
    probe.speedup = 2.0
    monkeypatch.setenv("COURSE_PRECISION", "FP32")
    mp = choose("cpu")
    assert mp.name == "fp32" and mp.probe.source == "override"
    monkeypatch.setenv("COURSE_PRECISION", "bf16")
    assert choose("cpu").name == "bf16"
    assert choose("cpu", "fp32").name == "fp32", "an explicit name beats the environment"
    assert probe.calls == 0, "a named precision is not measured"
    monkeypatch.setenv("COURSE_PRECISION", "auto")
    assert choose("cpu").name == "bf16" and probe.calls == 1


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


def _gpu_with_emulated_bf16(monkeypatch):
    """A pre-Ampere GPU (T4, V100) as torch sees it: bf16 only by emulation. Records the
    ``including_emulation`` of every call."""
    calls = []

    def is_bf16_supported(including_emulation=True):
        calls.append(including_emulation)
        return including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    return calls


@pytest.mark.filterwarnings("ignore:.*CUDA is not available")  # the fp16 scaler, off a GPU
def test_auto_on_cuda_needs_bf16_in_hardware(monkeypatch):
    calls = _gpu_with_emulated_bf16(monkeypatch)
    chosen = choose("cuda", "auto")
    assert chosen.name == "fp16" and chosen.scaler is not None
    assert calls == [False]  # emulated bf16 does not count for "auto"


def test_explicit_bf16_on_cuda_may_be_emulated(monkeypatch):
    calls = _gpu_with_emulated_bf16(monkeypatch)
    assert choose("cuda", "bf16").name == "bf16"
    assert calls == [True]
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: False)
    with pytest.raises(ValueError, match="no bf16 support.*'fp16'"):
        choose("cuda", "bf16")


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
    """Same model, same data, 40 steps: the final losses agree within 1 %.

    Measured (AMD EPYC, AVX2 kernels): 0.01-0.05 % apart for four model seeds; the tolerance
    leaves room for other CPUs' bf16 kernels (AMX, AVX-512 BF16) that round differently.
    """
    _, ref = _train(Precision("fp32"))
    _, low = _train(Precision("bf16"))
    assert ref[-1] < ref[0] - 0.5, "the tiny model should learn"
    assert low != ref, "bf16 autocast was not active"
    assert math.isclose(low[-1], ref[-1], rel_tol=0.01), (low[-1], ref[-1])


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
def test_setup_prints_and_remembers_the_precision(capsys, monkeypatch, probe):
    monkeypatch.setattr(precision, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setenv("COURSE_THREADS", "2")
    probe.speedup = 1.6
    runtime.setup(seed=0, device="cpu", precision="auto")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("| CPU threads: 2 | precision: bf16 | seed: 0")
    assert lines[1] == ("precision: bf16 (probe: bf16 1.60x the speed of fp32 on AMD EPYC, "
                        "2 threads; measured)")
    assert precision.current().name == "bf16"
    runtime.setup(seed=0, device="cpu", precision="auto")
    assert capsys.readouterr().out.splitlines()[1].endswith("2 threads; cached)")
    assert probe.calls == 1
    runtime.setup(seed=0, device="cpu")  # default: the notebook trains in float32
    out = capsys.readouterr().out
    assert "precision: fp32 | seed: 0" in out and len(out.splitlines()) == 1, "no probe line"
    assert precision.current().card_name == "float32"


def test_setup_seeds_after_the_probe(monkeypatch):
    """Whether the probe ran or came from the cache, a notebook starts from the same state."""
    monkeypatch.setenv("COURSE_THREADS", "1")

    def measure_and_draw(**kwargs):
        torch.rand(5)  # a probe that (wrongly) used the global random state
        return [1.0], [1.0]

    monkeypatch.setattr(precision, "measure_step_times", measure_and_draw)
    runtime.setup(seed=4, device="cpu", precision="auto")  # measured
    first = torch.rand(3)
    runtime.setup(seed=4, device="cpu", precision="auto")  # cached
    assert torch.equal(first, torch.rand(3))


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


CARD_ARGS = dict(profile="full", seed=0, device="cpu", wall_seconds=1.0, params={},
                 metrics={"x": 1.0})


def test_card_records_the_precision():
    precision.set_current(Precision("bf16"))
    assert results.make_card("nb", **CARD_ARGS)["precision"] == "bf16 autocast"
    assert results.make_card("nb", **CARD_ARGS, precision="float32")["precision"] == "float32"
    assert "precision" in results.card_table(results.make_card("nb", **CARD_ARGS)).index


def test_card_records_the_machine_and_the_probe(probe, monkeypatch):
    monkeypatch.setattr(precision, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setattr(results, "cpu_model", lambda: "AMD EPYC")
    torch.set_num_threads(2)
    precision.set_current(choose("cpu", "auto"))  # measured: 0.71x, so fp32
    card = results.make_card("nb", **CARD_ARGS)
    assert (card["precision"], card["cpu"], card["threads"]) == ("float32", "AMD EPYC", 2)
    assert card["precision_probe"] == {"bf16_speedup": 0.71, "source": "measured"}
    precision.set_current(choose("cpu", "auto"))
    assert results.make_card("nb", **CARD_ARGS)["precision_probe"]["source"] == "cached"
    precision.set_current(choose("cpu", "fp32"))  # named by the notebook
    card = results.make_card("nb", **CARD_ARGS)
    assert card["precision_probe"] == {"bf16_speedup": None, "source": "override"}
    precision.set_current(Precision("bf16"))  # built by hand: named too
    assert results.make_card("nb", **CARD_ARGS)["precision_probe"]["source"] == "override"
    table = results.card_table(card)
    assert table.loc["cpu", "value"] == "AMD EPYC" and table.loc["threads", "value"] == "2"
    assert table.loc["precision_probe.source", "value"] == "override"
    assert table.loc["precision_probe.bf16_speedup", "value"] == "None"


def test_gpu_profile_card_goes_to_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    results.write_card("zz_gpu", profile="gpu", seed=0, device="cpu", wall_seconds=1.0, params={},
                       metrics={"x": 1.0})
    assert (tmp_path / "gpu" / "zz_gpu.json").is_file()
    assert not (tmp_path / "zz_gpu.json").exists()


# --------------------------------------------------------------------------- where the time goes
def test_profile_ops_and_time_shares_find_the_matrix_products_and_the_casts():
    a, b = torch.randn(64, 32), torch.randn(32, 16)

    def work():
        return (a.to(torch.float64) @ b.to(torch.float64)).sum()

    table = precision.profile_ops(work)
    assert list(table.columns) == ["calls", "self_ms", "total_ms"]
    assert table.loc["aten::mm", "calls"] == 1 and table.loc["aten::_to_copy", "calls"] == 2
    assert (table["self_ms"] <= table["total_ms"] + 1e-9).all()
    assert table["self_ms"].is_monotonic_decreasing
    shares = precision.time_shares(table)
    assert set(shares) == {*precision.OP_GROUPS, "everything else"}
    assert shares["matrix products"] > 0 and shares["casts (aten::_to_copy)"] > 0
    assert math.isclose(sum(shares.values()), 1.0) or sum(shares.values()) > 1.0 - 1e-9


def test_time_shares_of_a_made_up_profile():
    import pandas as pd

    table = pd.DataFrame({"self_ms": [6.0, 1.0, 3.0], "total_ms": [6.0, 2.0, 3.0]},
                         index=["aten::mm", "aten::_to_copy", "aten::add"])
    shares = precision.time_shares(table)
    assert shares["matrix products"] == pytest.approx(0.6)
    assert shares["casts (aten::_to_copy)"] == pytest.approx(0.2)  # its whole time
    assert shares["everything else"] == pytest.approx(0.2)


def test_profile_ops_and_time_shares_reject_bad_inputs():
    import pandas as pd

    with pytest.raises(TypeError, match="function of no arguments"):
        precision.profile_ops(3)
    with pytest.raises(ValueError, match="warmup"):
        precision.profile_ops(lambda: None, warmup=-1)
    with pytest.raises(ValueError, match="missing"):
        precision.time_shares(pd.DataFrame({"self_ms": [1.0]}))
    with pytest.raises(ValueError, match="no time"):
        precision.time_shares(pd.DataFrame({"self_ms": [], "total_ms": []}))


def test_onednn_trace_parses_the_verbose_lines(monkeypatch):
    import subprocess

    seen = {}

    def fake_run(cmd, env, **kwargs):
        seen["env"], seen["code"] = env, cmd[-1]
        out = ("### course_lib snippet 0\n"
               "onednn_verbose,v1,primitive,exec,cpu,convolution,brgconv:avx2,forward,src:f32\n"
               "### course_lib snippet 1\nsomething else the snippet printed\n")
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(precision.subprocess, "run", fake_run)
    found = precision.onednn_trace({"conv": "conv()", "mm": "mm()"})
    assert found == {"conv": ["convolution brgconv:avx2"], "mm": []}
    assert seen["env"]["ONEDNN_VERBOSE"] == "1" and "conv()" in seen["code"]


def test_onednn_trace_runs_real_snippets_and_reports_failures():
    found = precision.onednn_trace({"nothing": "x = 1", "add": "torch.ones(2) + 1"})
    assert found == {"nothing": [], "add": []}  # an addition never calls oneDNN
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        precision.onednn_trace({"bad": "1 / 0"})
    with pytest.raises(TypeError, match="non-empty dict"):
        precision.onednn_trace({})


def test_speedup_summary_of_interleaved_times():
    import pandas as pd

    rows = [{"name": n, "round": r, "seconds": s}
            for r, (a, b) in enumerate([(0.10, 0.20), (0.12, 0.20), (0.11, 0.40)])
            for n, s in (("fp32", a), ("bf16", b))]
    out = precision.speedup_summary(pd.DataFrame(rows))
    assert out["fp32_ms"] == pytest.approx(110) and out["bf16_ms"] == pytest.approx(200)
    assert out["speedup"] == pytest.approx(0.55) and out["rounds"] == 3
    assert out["fp32_q25"] <= out["fp32_ms"] <= out["fp32_q75"]
    assert out["speedup_q25"] <= 0.55 <= out["speedup_q75"]  # per-round ratios 0.5, 0.6, 0.275


def test_speedup_summary_reads_a_real_timing_table():
    from course_lib import cost

    a = torch.randn(32, 32)
    b = a.bfloat16()
    times = cost.time_interleaved({"fp32": lambda: a @ a, "bf16": lambda: b @ b},
                                  repeats=3, min_time=0.001)
    out = precision.speedup_summary(times)
    assert out["rounds"] == 3 and out["speedup"] > 0


def test_speedup_summary_rejects_bad_tables():
    import pandas as pd

    with pytest.raises(ValueError, match="missing"):
        precision.speedup_summary(pd.DataFrame({"name": ["fp32"], "seconds": [1.0]}))
    table = pd.DataFrame({"name": ["fp32"], "round": [0], "seconds": [1.0]})
    with pytest.raises(ValueError, match=r"no times named \['bf16'\]"):
        precision.speedup_summary(table)


def test_speedup_summary_quartiles_are_stats_median_iqr():
    import pandas as pd

    from course_lib import stats

    fp32, bf16 = [0.10, 0.13, 0.11, 0.30], [0.20, 0.21, 0.40, 0.19]
    rows = [{"name": n, "round": r, "seconds": s}
            for r, pair in enumerate(zip(fp32, bf16)) for n, s in zip(("fp32", "bf16"), pair)]
    out = precision.speedup_summary(pd.DataFrame(rows))
    for name, seconds in (("fp32", fp32), ("bf16", bf16)):
        q = stats.median_iqr([1000 * s for s in seconds])
        assert (out[f"{name}_q25"], out[f"{name}_ms"], out[f"{name}_q75"]) == tuple(q)
    ratio = stats.median_iqr([a / b for a, b in zip(fp32, bf16)])
    assert (out["speedup_q25"], out["speedup_q75"]) == (ratio.q25, ratio.q75)
    assert out["speedup"] == out["fp32_ms"] / out["bf16_ms"]


def test_decide_and_the_probe_cache_use_the_median(monkeypatch, tmp_path):
    fp32, bf16 = [0.05, 0.04, 0.06, 0.30], [0.50, 0.40, 0.45, 0.41]
    assert decide(fp32, bf16) == ("fp32", 0.128)
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    monkeypatch.setattr(precision, "machine_busy", lambda threads: False)
    monkeypatch.setattr(precision, "measure_step_times", lambda **sizes: (fp32, bf16))
    probe = precision.cpu_probe(refresh=True)
    assert probe.source == "measured" and probe.bf16_speedup == 0.128
    entry = next(iter(json.loads(precision.probe_cache_path().read_text())["probes"].values()))
    assert (entry["fp32_step_ms"], entry["bf16_step_ms"]) == (55.0, 430.0)


# --------------------------------------------------------------------------- the probe's step
def test_probe_step_fills_in_the_default_sizes():
    assert precision.probe_step() == precision.PROBE_STEP
    sizes = precision.probe_step({"batch": 96, "d_model": 256})
    assert sizes == {**precision.PROBE_STEP, "batch": 96, "d_model": 256}
    assert precision.PROBE_STEP["batch"] == 8  # the default is not modified
    assert precision.describe_step(sizes) == (
        "batch 96 x 32 tokens, d_model 256, vocabulary 2000, 2 layers")


@pytest.mark.parametrize("step, message", [
    ({"batch_size": 96}, "unknown size 'batch_size'; use batch, length, d_model"),
    ({"batch": 0}, "batch must be a positive int"),
    ({"vocab": 80.0}, "vocab must be a positive int"),
    ({"layers": True}, "layers must be a positive int"),
    ({"d_model": 130}, "multiple of 4"),
])
def test_probe_step_rejects_bad_sizes(step, message):
    with pytest.raises(ValueError, match=message):
        precision.probe_step(step)


def test_probe_step_must_be_a_dict():
    with pytest.raises(TypeError, match="dict of sizes"):
        precision.probe_step([("batch", 96)])


def test_a_named_step_is_timed_and_cached_apart_from_the_default(probe, monkeypatch):
    seen = []
    fake = precision.measure_step_times

    def recording(**sizes):
        seen.append(sizes)
        return fake(**sizes)

    monkeypatch.setattr(precision, "measure_step_times", recording)
    monkeypatch.setattr(precision, "cpu_model", lambda: "Test CPU")
    torch.set_num_threads(2)
    big = {"batch": 96, "d_model": 256, "vocab": 8000}
    probe.speedup = 1.5
    first = precision.cpu_probe(step=big)
    assert seen[-1] == precision.probe_step(big)  # the notebook's sizes were timed
    assert (first.source, first.choice) == ("measured", "bf16")
    assert first.step == "batch 96 x 32 tokens, d_model 256, vocabulary 8000, 2 layers"
    assert first.card()["step"] == first.step and "for a step of batch 96" in str(first)
    probe.speedup = 0.9
    small = precision.cpu_probe()  # the default step: its own entry, measured
    assert (small.source, small.choice, small.step) == ("measured", "fp32", "")
    assert "step" not in small.card() and seen[-1] == precision.PROBE_STEP
    again = precision.cpu_probe(step=big)
    assert (again.source, again.bf16_speedup, again.step) == ("cached", 1.5, first.step)
    entries = json.loads(precision.probe_cache_path().read_text())["probes"]
    assert len(entries) == 2
    assert entries[precision.probe_key("Test CPU", 2, big)]["step"] == first.step


def test_setup_passes_the_probe_step_on(probe, monkeypatch, capsys):
    monkeypatch.setattr(precision, "cpu_model", lambda: "Test CPU")
    probe.speedup = 1.5
    runtime.setup(seed=0, device="cpu", precision="auto", probe_step={"batch": 96})  # the CPU probe
    assert precision.current().name == "bf16"
    assert precision.current().probe.step.startswith("batch 96 x 32 tokens")
    assert "for a step of batch 96" in capsys.readouterr().out
