"""Tests of course_lib.distributed, ending with a real 2-process DDP job under torchrun whose
parameters must equal one process's with the same global batch, with or without accumulation."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from course_lib import distributed as D
from course_lib import gpt

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN_ENV = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
# 4 Adam steps of a tiny GPT: the orders in which float sums are taken differ between the
# runs, nothing else; measured differences are ~1e-8, a real mistake (half the batch) ~1e-3
TOLERANCE = 1e-5
TOLERANCE_FLOAT64 = 1e-9  # the torchrun test runs in float64: rounding differences ~1e-16


def _clear_torchrun_env(monkeypatch):
    for key in (*D.ENV_VARS, "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def group_of_one(monkeypatch):
    """A real gloo process group of one process (this one), destroyed afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    info = D.ProcessInfo(0, 1, 0, 1)
    backend = D.init_process_group(info, "cpu")
    try:
        yield info, backend
    finally:
        dist.destroy_process_group()


def _rows(n=64, length=9, vocab=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n, length), generator=g)


def _tiny(**kw):
    base = dict(steps=3, global_batch=8, d_model=16, num_heads=2, num_layers=1, d_ff=32,
                warmup_steps=1, log_every=0, device="cpu")
    return D.TrainConfig(**{**base, **kw})


# --------------------------------------------------------------------------- processes
def test_process_info_reads_torchrun_variables():
    info = D.process_info({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
                           "LOCAL_WORLD_SIZE": "2"})
    assert info == D.ProcessInfo(rank=3, world_size=4, local_rank=1, local_world_size=2)
    assert not info.is_main and D.ProcessInfo().is_main


def test_process_info_without_torchrun_says_how_to_launch(monkeypatch):
    _clear_torchrun_env(monkeypatch)
    with pytest.raises(D.LaunchError, match=r"not started by torchrun.*torchrun --standalone "
                                            r"--nproc_per_node=N"):
        D.process_info()
    with pytest.raises(D.LaunchError, match="LOCAL_RANK"):
        D.process_info({"RANK": "0", "WORLD_SIZE": "1"})


@pytest.mark.parametrize("env", [
    {"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
    {"RANK": "0", "WORLD_SIZE": "0", "LOCAL_RANK": "0"},
    {"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
])
def test_process_info_rejects_nonsense(env):
    with pytest.raises(D.LaunchError):
        D.process_info(env)


def test_choose_backend():
    assert D.choose_backend("cpu") == "gloo"
    assert D.choose_backend(torch.device("cuda", 1)) == "nccl"


def test_pick_device(monkeypatch):
    two = D.ProcessInfo(1, 2, 1, 2)
    assert D.pick_device(two, "cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert D.pick_device(two, "auto") == torch.device("cpu")
    with pytest.raises(D.LaunchError, match="2 processes on this node but 0 CUDA GPUs"):
        D.pick_device(two, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert D.pick_device(two, "auto") == torch.device("cpu")  # not a GPU for each process
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert D.pick_device(two, "auto") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="device must be"):
        D.pick_device(two, "mps")


def test_per_process_batch():
    assert D.per_process_batch(64, 2) == 32
    assert D.per_process_batch(64, 2, micro_batches=4) == 8
    with pytest.raises(ValueError, match=r"7 rows cannot be split evenly over 2 .*multiple of 2"):
        D.per_process_batch(7, 2)
    with pytest.raises(ValueError, match="multiple of 6"):
        D.per_process_batch(8, 2, micro_batches=3)
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        D.per_process_batch(8, 0)


def test_print0_prints_without_a_process_group(capsys):
    D.print0("hello", 1)
    assert capsys.readouterr().out == "hello 1\n"


def test_process_group_of_one_trains_with_ddp_and_manual(group_of_one, capsys):
    info, backend = group_of_one
    assert backend == "gloo" and dist.get_world_size() == 1
    D.print0("from rank 0")
    assert "from rank 0" in capsys.readouterr().out
    rows = _rows()
    results = {}
    for mode in ("single", "ddp", "manual"):
        model, stats = D.train(rows, 20, _tiny(mode=mode, probe_steps=1), info=info)
        results[mode] = model.state_dict()
        assert stats["world_size"] == 1 and len(stats["loss"]) == 3
    assert D.max_param_diff(results["ddp"], results["single"]) < TOLERANCE
    assert D.max_param_diff(results["manual"], results["single"]) < TOLERANCE


def test_allreduce_gradients_averages(group_of_one):
    model = torch.nn.Linear(3, 2)
    model(torch.ones(4, 3)).sum().backward()
    before = model.weight.grad.clone()
    D.allreduce_gradients(model, world_size=1)  # one process: the sum is itself
    assert torch.equal(model.weight.grad, before)


def test_probe_times_each_part_in_every_round(group_of_one):
    info, _ = group_of_one
    cfg = _tiny(mode="ddp")
    torch.manual_seed(0)
    bare = gpt.GPT(gpt.GPTConfig(vocab_size=20, max_len=8, d_model=16, num_heads=2,
                                 num_layers=1, d_ff=32, dropout=0.0))
    model = torch.nn.parallel.DistributedDataParallel(bare)
    probe = D._probe(model, _rows(n=4), cfg, world_size=1, repeats=3)
    assert {k: len(v) for k, v in probe.items() if k != "gradient_mb"} == {
        "local": 3, "synced": 3, "allreduce": 3}
    assert all(t > 0 for k in ("local", "synced", "allreduce") for t in probe[k])
    n = sum(p.numel() for p in bare.parameters())
    assert probe["gradient_mb"] == pytest.approx(4 * n / 1e6)
    assert all(p.grad is None for p in bare.parameters()), "the probe leaves no gradients"
    summary = D.comm_summary([probe, probe])
    assert summary["rounds"] == 6 and 0 <= summary["exposed_share"] < 1


def test_comm_summary_of_made_up_probes():
    probe = {"local": [0.1, 0.1, 0.1], "synced": [0.15, 0.14, 0.16],
             "allreduce": [0.01, 0.02, 0.01], "gradient_mb": 4.2}
    out = D.comm_summary(probe)
    assert out["synced_ms"] == pytest.approx(150) and out["local_ms"] == pytest.approx(100)
    assert out["exposed_ms"] == pytest.approx(50)
    assert out["exposed_share"] == pytest.approx(1 / 3)  # of the synced pass that holds it
    assert out["allreduce_share"] == pytest.approx(10 / 150)
    assert out["synced_q25_ms"] <= out["synced_ms"] <= out["synced_q75_ms"]
    faster = {**probe, "synced": [0.09, 0.09, 0.09]}  # noise: no exposed time below zero
    assert D.comm_summary(faster)["exposed_ms"] == 0.0
    with pytest.raises(ValueError, match="probe_steps"):
        D.comm_summary([])
    with pytest.raises(ValueError, match="no 'allreduce' times"):
        D.comm_summary({"local": [0.1], "synced": [0.1], "allreduce": []})


def test_step_summary_takes_medians_after_the_first_steps():
    seconds = [5.0] + [0.1] * 17 + [2.0, 3.0]  # one slow first step, two slow steps late on
    out = D.step_summary(seconds)
    assert out["steps"] == 18  # a tenth (2 steps) left out
    assert out["median_ms"] == pytest.approx(100)  # the mean would be 0.37 s
    assert out["q25_ms"] == pytest.approx(100) and out["q75_ms"] == pytest.approx(100)
    assert D.step_summary([0.1, 0.3], skip=0)["median_ms"] == pytest.approx(200)
    assert D.step_summary([0.2])["median_ms"] == pytest.approx(200)
    with pytest.raises(ValueError, match="positive seconds"):
        D.step_summary([])
    with pytest.raises(ValueError, match="positive seconds"):
        D.step_summary([0.1, -1.0])
    with pytest.raises(ValueError, match="skip"):
        D.step_summary([0.1, 0.2], skip=2)


def test_training_log_reports_the_median_step(capsys):
    _, stats = D.train(_rows(), 20, _tiny(steps=4, log_every=2))
    out = capsys.readouterr().out
    assert out.count("ms/step over 2") == 2
    assert stats["steps_per_second"] == pytest.approx(1000 / stats["step_median_ms"])


# --------------------------------------------------------------------------- data
def test_full_windows_have_no_padding():
    seqs = [list(range(3, 3 + 20)), list(range(3, 3 + 9)), [5, 6]]
    rows = D.full_windows(seqs, window=4, pad_id=0)
    assert rows.shape[1] == 5 and (rows != 0).all()
    assert len(rows) == 4 + 2  # 19 targets -> 4 full windows of 4; 8 targets -> 2; 1 -> 0


def test_prepare_save_and_load_rows(tmp_path):
    rows = D.prepare_rows(reviews=40, val_reviews=5, vocab_words=100, window=8)
    assert rows["vocab_size"] == 103 and rows["reviews"] == 40
    for part in ("train", "val"):
        assert rows[part].shape[1] == 9 and (rows[part] != rows["pad_id"]).all()
        assert int(rows[part].max()) < rows["vocab_size"]
    path = D.save_rows(rows, tmp_path / "sub" / "rows.pt")
    back = D.load_rows(path)
    assert torch.equal(back["train"], rows["train"]) and back["window"] == 8
    with pytest.raises(FileNotFoundError, match="course_lib.distributed prepare"):
        D.load_rows(tmp_path / "missing.pt")


def test_shard_batches_cover_the_same_rows_whatever_the_split():
    rows = torch.arange(50)[:, None].repeat(1, 3)  # row i holds i
    one = D.shard_batches(rows, 6, num_shards=1, seed=3)
    three = [D.shard_batches(rows, 2, num_shards=3, shard=s, seed=3) for s in range(3)]
    for _ in range(20):  # 8 steps per pass: crosses passes (new orders)
        whole = sorted(next(one)[:, 0].tolist())
        parts = sorted(sum((next(it)[:, 0].tolist() for it in three), []))
        assert whole == parts
    with pytest.raises(ValueError, match="too few"):
        next(D.shard_batches(rows[:5], 4, num_shards=2))


# --------------------------------------------------------------------------- training
def test_lm_loss_is_gpt_loss():
    torch.manual_seed(0)
    model = gpt.GPT(gpt.GPTConfig(vocab_size=20, max_len=8, d_model=16, num_heads=2,
                                  num_layers=1, d_ff=32, dropout=0.0, pad_id=0))
    rows = _rows(4)
    assert torch.allclose(D.lm_loss(model, rows), model.loss(rows))


def test_train_single_equals_accumulation_and_checks_its_launch():
    rows = _rows()
    whole, stats = D.train(rows, 20, _tiny(), val_rows=rows[:8])
    accum, stats_a = D.train(rows, 20, _tiny(micro_batches=2))
    half, _ = D.train(rows, 20, _tiny(global_batch=4))
    assert D.max_param_diff(whole.state_dict(), accum.state_dict()) < TOLERANCE
    assert D.max_param_diff(whole.state_dict(), half.state_dict()) > 100 * TOLERANCE
    assert stats["per_process_batch"] == 8 and stats_a["per_process_batch"] == 4
    assert stats["val_loss"] > 0 and stats["steps_per_second"] > 0
    assert torch.allclose(torch.tensor(stats["loss"]), torch.tensor(stats_a["loss"]), atol=1e-5)
    with pytest.raises(D.LaunchError, match="runs in one process"):
        D.train(rows, 20, _tiny(), info=D.ProcessInfo(0, 2, 0, 2))
    with pytest.raises(D.LaunchError, match="needs a process group"):
        D.train(rows, 20, _tiny(mode="ddp"))
    with pytest.raises(ValueError, match="mode must be one of"):
        _tiny(mode="fsdp")
    with pytest.raises(ValueError, match="dtype must be one of"):
        _tiny(dtype="bfloat16")


def test_train_in_float64():
    model, stats = D.train(_rows(), 20, _tiny(dtype="float64", steps=1))
    assert all(p.dtype == torch.float64 for p in model.parameters()) and stats["dtype"] == "float64"


def test_checkpoints_every_k_steps(tmp_path):
    assert D.checkpoint_path(tmp_path / "run.pt", 20) == tmp_path / "run.step0020.pt"
    out = tmp_path / "run.pt"
    model, _ = D.train(_rows(), 20, _tiny(steps=4, checkpoint_every=2), checkpoint_to=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.step0002.pt", "run.step0004.pt"]
    last = D.load_run(D.checkpoint_path(out, 4))
    assert last["stats"] == {"step": 4}
    assert D.max_param_diff(last["state_dict"], model.state_dict()) == 0.0


def test_save_run_load_run_and_max_param_diff(tmp_path):
    cfg = _tiny(steps=1)
    model, stats = D.train(_rows(), 20, cfg)
    path = D.save_run(model, cfg, stats, tmp_path / "run.pt")
    saved = D.load_run(path)
    assert saved["train_config"]["steps"] == 1 and saved["stats"]["mode"] == "single"
    assert D.max_param_diff(saved["state_dict"], model.state_dict()) == 0.0
    with pytest.raises(ValueError, match="different parameters"):
        D.max_param_diff(saved["state_dict"], {"x": torch.zeros(1)})


# --------------------------------------------------------------------------- on paper
def test_training_memory_bytes():
    n = 4_684_800  # chapter 9's translator (2 + 2 layers)
    ddp = D.training_memory_bytes(n)
    assert ddp == {"weights": 4 * n, "gradients": 4 * n, "optimizer": 8 * n, "total": 16 * n}
    assert D.training_memory_bytes(n, 8, "fsdp")["total"] == pytest.approx(2 * n)
    assert D.training_memory_bytes(n, 8, "zero1")["total"] == pytest.approx(9 * n)
    assert D.training_memory_bytes(n, 8, "zero2")["total"] == pytest.approx(5.5 * n)
    assert D.training_memory_bytes(10**9, 1, "ddp", "mixed")["total"] == 16e9
    with pytest.raises(ValueError, match="strategy"):
        D.training_memory_bytes(n, 8, "zero3")
    with pytest.raises(ValueError, match="precision"):
        D.training_memory_bytes(n, 8, "fsdp", "fp8")
    with pytest.raises(ValueError, match="world_size"):
        D.training_memory_bytes(n, 0)


def test_ring_allreduce_bytes():
    assert D.ring_allreduce_bytes(1000, 1) == 0
    assert D.ring_allreduce_bytes(1000, 2) == 4000
    assert D.ring_allreduce_bytes(1000, 8) == 7000
    with pytest.raises(ValueError):
        D.ring_allreduce_bytes(1000, 0)


def test_torchrun_command():
    one = D.torchrun_command(["train", "--steps", 5], nproc_per_node=2)
    assert one == ["torchrun", "--standalone", "--nproc_per_node=2", "-m",
                   "course_lib.distributed", "train", "--steps", "5"]
    many = D.torchrun_command(["train"], 8, nnodes=2, rdzv_endpoint="node0:29500",
                              python="/usr/bin/python3")
    assert many[:3] == ["/usr/bin/python3", "-m", "torch.distributed.run"]
    assert {"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=node0:29500",
            "--nproc_per_node=8"} <= set(many)
    with pytest.raises(ValueError, match="rdzv_endpoint"):
        D.torchrun_command(["train"], 8, nnodes=2)
    with pytest.raises(ValueError, match="nproc_per_node"):
        D.torchrun_command(["train"], 0)


def test_draw_ddp_step(close_figures):
    fig = D.draw_ddp_step(world_size=3)
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "all-reduce" in texts and "rank 2" in texts and "3 processes" in texts
    assert "(g\u2080 + g\u2081 + g\u2082) / 3" in texts  # subscript digits
    with pytest.raises(ValueError, match="world_size"):
        D.draw_ddp_step(0)


# --------------------------------------------------------------------------- entry point
def test_main_without_torchrun_is_a_clean_error(monkeypatch, tmp_path, capsys):
    _clear_torchrun_env(monkeypatch)
    code = D.main(["train", "--rows", str(tmp_path / "rows.pt"), "--mode", "ddp"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "torchrun --standalone" in err
    assert "Traceback" not in err


def test_main_indivisible_batch_is_a_clean_error(monkeypatch, tmp_path, capsys):
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    code = D.main(["train", "--rows", str(tmp_path / "rows.pt"), "--mode", "ddp",
                   "--global-batch", "7"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot be split evenly over 2 process(es)" in err
    assert not dist.is_initialized()  # refused before joining any process group


def test_check_mode_and_single_under_torchrun(monkeypatch, tmp_path, capsys):
    D.check_mode("single", D.ProcessInfo())
    D.check_mode("ddp", D.ProcessInfo(0, 2, 0, 2))
    with pytest.raises(D.LaunchError, match="runs in one process, not 2"):
        D.check_mode("single", D.ProcessInfo(0, 2, 0, 2))
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    assert D.main(["train", "--rows", str(tmp_path / "rows.pt"), "--mode", "single"]) == 2
    assert "runs in one process" in capsys.readouterr().err


def test_main_prepare_and_missing_rows(tmp_path, capsys):
    out = tmp_path / "rows.pt"
    assert D.main(["prepare", "--out", str(out), "--reviews", "30", "--val-reviews", "3",
                   "--vocab-words", "50", "--window", "8"]) == 0
    assert "training and" in capsys.readouterr().out and out.is_file()
    assert D.main(["train", "--rows", str(tmp_path / "nope.pt")]) == 2
    assert "prepare --out" in capsys.readouterr().err


# --------------------------------------------------------------------------- torchrun
def _run(cmd, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for key in (*D.ENV_VARS, "LOCAL_WORLD_SIZE"):
        env.pop(key, None)
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done


def test_torchrun_ddp_equals_one_process_and_accumulation(tmp_path, monkeypatch):
    """2 processes x 4 rows (DDP, gloo) = 1 process x 8 rows = 1 process x 2 micro-batches of 4.

    The one-process runs go through the same entry point in this process (``main``); the DDP
    run is a real torchrun job of two processes.
    """
    _clear_torchrun_env(monkeypatch)
    rows = D.prepare_rows(reviews=60, val_reviews=3, vocab_words=100, window=8)
    path = D.save_rows(rows, tmp_path / "rows.pt")
    common = ["train", "--rows", path, "--steps", "4", "--global-batch", "8", "--d-model", "16",
              "--num-heads", "2", "--num-layers", "1", "--d-ff", "32", "--warmup-steps", "1",
              "--device", "cpu", "--log-every", "0", "--dtype", "float64"]
    common = [str(c) for c in common]
    runs = {"single": ["--mode", "single"],
            "accumulate": ["--mode", "single", "--micro-batches", "2"]}
    for name, extra in runs.items():
        assert D.main([*common, *extra, "--out", str(tmp_path / f"{name}.pt")]) == 0
    cmd = D.torchrun_command([*common, "--mode", "ddp", "--out", tmp_path / "ddp.pt"],
                             nproc_per_node=2, python=sys.executable)
    done = _run(cmd, cwd=tmp_path)
    assert done.stdout.count("saved ") == 1  # rank 0 alone writes and prints
    states = {name: D.load_run(tmp_path / f"{name}.pt") for name in ("single", "accumulate", "ddp")}
    stats = states["ddp"]["stats"]
    assert stats["world_size"] == 2 and stats["backend"] == "gloo"
    assert stats["per_process_batch"] == 4 and states["single"]["stats"]["per_process_batch"] == 8
    ddp = states["ddp"]["state_dict"]
    assert ddp["head.weight"].dtype == torch.float64
    assert D.max_param_diff(ddp, states["single"]["state_dict"]) < TOLERANCE_FLOAT64
    assert D.max_param_diff(ddp, states["accumulate"]["state_dict"]) < TOLERANCE_FLOAT64
    assert stats["loss"] == pytest.approx(states["single"]["stats"]["loss"], abs=1e-9)
    # and the comparison has teeth: the trained weights are far from the initial ones
    torch.manual_seed(0)
    init = gpt.GPT(gpt.GPTConfig(**states["ddp"]["gpt_config"])).double()
    assert D.max_param_diff(ddp, init.state_dict()) > 1e6 * TOLERANCE_FLOAT64


def test_step_and_comm_summaries_use_the_standard_librarys_quartiles():
    import statistics

    from course_lib import stats

    seconds = [0.31, 0.29, 0.35, 0.30, 0.52, 0.28, 0.33]
    q25, median, q75 = statistics.quantiles(seconds, n=4, method="inclusive")
    assert stats.median_iqr(seconds, method="statistics") == (q25, median, q75)
    out = D.step_summary(seconds, skip=0)
    assert (out["q25_ms"], out["median_ms"], out["q75_ms"]) == (
        1000 * q25, 1000 * median, 1000 * q75)
    probe = {"local": seconds, "synced": seconds, "allreduce": seconds, "gradient_mb": 1.0}
    comm = D.comm_summary(probe)
    assert (comm["local_q25_ms"], comm["local_ms"], comm["local_q75_ms"]) == (
        1000 * q25, 1000 * median, 1000 * q75)
    with pytest.raises(ValueError, match="NaN: drop missing"):
        D.comm_summary({**probe, "allreduce": [0.1, float("nan")]})
