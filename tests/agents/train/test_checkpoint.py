import hashlib
import json
import logging
import random

import numpy as np
import pytest
import torch

from searchgym.agents.train import checkpoint as ckpt
from searchgym.agents.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from searchgym.errors import ConfigError, DataNotFoundError

DATA = torch.linspace(-1, 1, 40).reshape(10, 4)


def make_run(seed: int = 0):
    """A tiny model with dropout, AdamW and a warm-up schedule: a step draws from torch's RNG."""
    torch.manual_seed(seed)  # test code: a different seed gives a different model to load into
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))
    return model, optimizer, scheduler


def train_step(model, optimizer, scheduler, data_state: dict) -> None:
    """One step that draws from every global generator and advances a position in a task stream."""
    pos = data_state["pos"]
    x = DATA[pos % len(DATA)] + torch.randn(4) * 0.1
    target = float(np.random.normal()) + random.random()
    loss = (model(x).squeeze() - target) ** 2
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    data_state["pos"] = pos + random.randint(1, 3)


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_same_params(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def assert_same_optimizer(a: dict, b: dict) -> None:
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for i in a["state"]:
        for key, value in a["state"][i].items():
            assert torch.equal(value, b["state"][i][key]), (i, key)


def test_save_then_load_restores_params_optimizer_rng_and_state(tmp_path):
    model, optimizer, scheduler = make_run()
    seed_all(1)
    data_state = {"pos": 0}
    for _ in range(2):
        train_step(model, optimizer, scheduler, data_state)
    path = save_checkpoint(
        tmp_path,
        2,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        data_state=data_state,
        extra={"config": {"lr": 0.05}},
    )
    assert path == tmp_path / "checkpoints" / "step-000002"
    saved_params, saved_opt = params(model), optimizer.state_dict()
    saved_opt = {"state": {i: {k: v.clone() for k, v in s.items()} for i, s in saved_opt["state"].items()},
                 "param_groups": [dict(g) for g in saved_opt["param_groups"]]}  # fmt: skip
    expected_draws = draws()

    train_step(model, optimizer, scheduler, {"pos": 5})  # perturb weights, optimizer, schedule, RNG
    draws()
    assert not torch.equal(params(model)["0.weight"], saved_params["0.weight"])

    state = load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    assert state["step"] == 2 and state["data_state"] == data_state and state["path"] == path
    assert state["extra"] == {"config": {"lr": 0.05}}
    assert_same_params(params(model), saved_params)
    assert_same_optimizer(optimizer.state_dict(), saved_opt)
    assert scheduler.last_epoch == 2 and optimizer.param_groups[0]["lr"] == pytest.approx(0.05)
    assert draws() == expected_draws


def test_run_killed_after_step_4_resumes_bit_identical(tmp_path):
    model, optimizer, scheduler = make_run()
    seed_all(7)
    data_state = {"pos": 0}
    for _ in range(6):
        train_step(model, optimizer, scheduler, data_state)
    uninterrupted, uninterrupted_pos = params(model), data_state["pos"]

    model, optimizer, scheduler = make_run()
    seed_all(7)
    data_state = {"pos": 0}
    for step in range(1, 5):
        train_step(model, optimizer, scheduler, data_state)
        if step % 2 == 0:
            save_checkpoint(
                tmp_path, step, model=model, optimizer=optimizer, scheduler=scheduler, data_state=data_state
            )
    del model, optimizer, scheduler  # the process dies here
    draws()  # and whatever the new process does first moves the global generators

    model, optimizer, scheduler = make_run(seed=123)  # fresh objects, different initial weights
    path = latest_checkpoint(tmp_path)
    assert path is not None and path.name == "step-000004"
    state = load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    data_state = state["data_state"]
    for _ in range(state["step"], 6):
        train_step(model, optimizer, scheduler, data_state)
    assert_same_params(params(model), uninterrupted)
    assert data_state["pos"] == uninterrupted_pos


@pytest.mark.parametrize("interrupt", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_interrupted_save_leaves_previous_checkpoint(tmp_path, monkeypatch, interrupt):
    model, optimizer, scheduler = make_run()
    first = save_checkpoint(tmp_path, 2, model=model, optimizer=optimizer, data_state={"pos": 2})
    train_step(model, optimizer, scheduler, {"pos": 0})
    real_save = torch.save

    def failing_save(obj, f, *args, **kwargs):
        if str(f).endswith("rng.pt"):  # the model and optimizer are already written
            raise interrupt
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(ckpt.torch, "save", failing_save)
    with pytest.raises(type(interrupt)):
        save_checkpoint(tmp_path, 4, model=model, optimizer=optimizer, data_state={"pos": 4})
    monkeypatch.undo()
    assert latest_checkpoint(tmp_path) == first
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000002"]
    assert load_checkpoint(first, model=model, optimizer=optimizer)["data_state"] == {"pos": 2}


def test_leftovers_of_a_killed_save_are_ignored_then_cleaned(tmp_path):
    model, optimizer, _ = make_run()
    first = save_checkpoint(tmp_path, 2, model=model, optimizer=optimizer, data_state={})
    root = tmp_path / "checkpoints"
    # killed mid-write: a temporary directory with some files, and a step directory without marker
    (root / ".tmp-step-000004-abc").mkdir()
    (root / ".tmp-step-000004-abc" / "model.safetensors").write_bytes(b"half")
    (root / "step-000006").mkdir()
    (root / "step-000006" / "optimizer.pt").write_bytes(b"half")
    assert latest_checkpoint(tmp_path) == first
    with pytest.raises(DataNotFoundError, match="not a complete checkpoint"):
        load_checkpoint(root / "step-000006", model=model, optimizer=optimizer)

    save_checkpoint(tmp_path, 4, model=model, optimizer=optimizer, data_state={})
    assert not (root / ".tmp-step-000004-abc").exists()
    assert latest_checkpoint(tmp_path) == root / "step-000004"


def test_keeps_the_newest_and_drops_an_abandoned_future(tmp_path):
    model, optimizer, _ = make_run()
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, data_state={}, keep=2)
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["step-000004", "step-000005"]
    # resumed from step 4 by hand and saved step 4 again: step 5 belongs to the abandoned run
    save_checkpoint(tmp_path, 4, model=model, optimizer=optimizer, data_state={"again": True}, keep=2)
    assert sorted(p.name for p in root.iterdir()) == ["step-000004"]
    assert json.loads((root / "step-000004" / "state.json").read_text())["data_state"] == {"again": True}
    for step in (6, 7, 8):
        save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, data_state={}, keep=None)
    assert len(list(root.iterdir())) == 4


def test_step_zero_the_starting_point_is_never_pruned(tmp_path):
    model, optimizer, _ = make_run()
    for step in range(5):
        save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, data_state={}, keep=1)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000000", "step-000004"]


def cut(file, n_bytes: int = 16) -> None:
    """Truncate ``file`` by ``n_bytes``, as an interrupted copy leaves it."""
    with open(file, "r+b") as f:
        f.truncate(file.stat().st_size - n_bytes)


def test_state_json_is_the_manifest_of_every_file(tmp_path):
    model, optimizer, scheduler = make_run()
    path = save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, scheduler=scheduler, data_state={})
    state = json.loads((path / "state.json").read_text())
    sizes = {p.name: p.stat().st_size for p in path.iterdir() if p.name != "state.json"}
    assert set(sizes) == {"model.safetensors", "optimizer.pt", "scheduler.pt", "rng.pt"}
    assert state["files"] == sizes
    assert state["sha256"] == {n: hashlib.sha256((path / n).read_bytes()).hexdigest() for n in sizes}


def test_latest_skips_newer_broken_checkpoints_and_says_why(tmp_path, caplog):
    model, optimizer, _ = make_run()
    for step in range(1, 6):
        save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, data_state={"pos": step}, keep=None)
    root = tmp_path / "checkpoints"
    size = (root / "step-000005" / "model.safetensors").stat().st_size
    cut(root / "step-000005" / "model.safetensors", 16)
    (root / "step-000004" / "state.json").unlink()
    rng = (root / "step-000003" / "rng.pt").read_bytes()
    (root / "step-000003" / "rng.pt").write_bytes(rng[:-1] + bytes([rng[-1] ^ 1]))  # same size
    (root / "step-000002" / "optimizer.pt").unlink()

    with caplog.at_level(logging.WARNING, logger=ckpt.__name__):
        assert latest_checkpoint(tmp_path) == root / "step-000001"
    assert [r.getMessage().split("/checkpoints/")[1] for r in caplog.records] == [
        f"step-000005: model.safetensors is {size - 16} bytes, not {size} (truncated or altered)",
        "step-000004: no state.json, its manifest",
        "step-000003: rng.pt has other contents than when it was saved (sha256 differs)",
        "step-000002: optimizer.pt is missing",
    ]
    with pytest.raises(
        DataNotFoundError, match=rf"not a complete checkpoint \(model.safetensors is {size - 16} "
    ):
        load_checkpoint(root / "step-000005", model=model, optimizer=optimizer)
    assert load_checkpoint(root / "step-000001", model=model, optimizer=optimizer)["data_state"] == {"pos": 1}


def test_a_checkpoint_from_before_manifests_is_taken_if_its_weights_open(tmp_path, caplog):
    model, optimizer, _ = make_run()
    for step in (1, 2):
        path = save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, data_state={}, keep=None)
        state = json.loads((path / "state.json").read_text())
        (path / "state.json").write_text(json.dumps({k: state[k] for k in ("step", "data_state", "extra")}))
    root = tmp_path / "checkpoints"
    assert latest_checkpoint(tmp_path) == root / "step-000002"
    assert load_checkpoint(root / "step-000002", model=model, optimizer=optimizer)["step"] == 2

    cut(root / "step-000002" / "model.safetensors")
    (root / "step-000001" / "rng.pt").unlink()
    with caplog.at_level(logging.WARNING, logger=ckpt.__name__):
        assert latest_checkpoint(tmp_path) is None
    assert "step-000002: model.safetensors is unreadable (" in caplog.records[0].getMessage()
    assert "step-000001: rng.pt missing (a checkpoint without a manifest)" in caplog.records[1].getMessage()


def test_only_intact_checkpoints_count_towards_keep(tmp_path):
    model, optimizer, _ = make_run()
    for step in (1, 2):
        save_checkpoint(tmp_path, step, model=model, optimizer=optimizer, data_state={}, keep=None)
    root = tmp_path / "checkpoints"
    cut(root / "step-000002" / "model.safetensors")
    save_checkpoint(tmp_path, 3, model=model, optimizer=optimizer, data_state={}, keep=2)
    # the broken step 2 goes; step 1, the only intact one before step 3, stays
    assert sorted(p.name for p in root.iterdir()) == ["step-000001", "step-000003"]


def test_bad_arguments_write_nothing(tmp_path):
    model, optimizer, _ = make_run()
    with pytest.raises(ConfigError, match="JSON-serialisable"):
        save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, data_state={"rng": object()})
    with pytest.raises(ConfigError, match="keep must be a positive integer"):
        save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, data_state={}, keep=0)
    with pytest.raises(ConfigError, match="step must be a non-negative integer"):
        save_checkpoint(tmp_path, -1, model=model, optimizer=optimizer, data_state={})
    assert latest_checkpoint(tmp_path) is None


def test_load_refuses_another_model_and_a_missing_scheduler(tmp_path):
    model, optimizer, scheduler = make_run()
    path = save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, data_state={})
    other = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 2)
    )
    before = params(other)
    with pytest.raises(ConfigError, match=r"does not match the model.*other shapes \['3.weight', '3.bias'\]"):
        load_checkpoint(path, model=other)
    assert_same_params(params(other), before)  # nothing was copied in
    with pytest.raises(ConfigError, match="does not match the model"):
        load_checkpoint(path, model=torch.nn.Sequential(torch.nn.Linear(4, 16)))
    with pytest.raises(ConfigError, match="saved without a scheduler"):
        load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)


def test_transformers_model_checkpoint_loads_in_place_and_as_a_model(tmp_path, tiny_llama_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = tokenizer("Who founded the city?", return_tensors="pt").input_ids
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    path = save_checkpoint(
        tmp_path, 1, model=model, optimizer=optimizer, tokenizer=tokenizer, data_state={"task": 3}
    )
    assert (path / "model.safetensors").is_file() and (path / "config.json").is_file()

    reloaded = AutoModelForCausalLM.from_pretrained(path)  # a checkpoint is also a model directory
    assert AutoTokenizer.from_pretrained(path)("Who").input_ids == tokenizer("Who").input_ids
    assert_same_params(params(reloaded), params(model))

    fresh = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)  # the weights before the step
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    assert not torch.equal(fresh.model.embed_tokens.weight, model.model.embed_tokens.weight)
    assert load_checkpoint(path, model=fresh, optimizer=fresh_optimizer)["data_state"] == {"task": 3}
    assert_same_params(params(fresh), params(model))
    assert fresh.lm_head.weight is fresh.model.embed_tokens.weight  # still tied
    assert_same_optimizer(fresh_optimizer.state_dict(), optimizer.state_dict())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the CUDA random state needs a CUDA device")
def test_cuda_random_state_is_restored(tmp_path):
    model, optimizer, _ = make_run()
    model.cuda()
    path = save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, data_state={})
    expected = torch.rand(3, device="cuda")
    torch.rand(5, device="cuda")
    load_checkpoint(path, model=model, optimizer=optimizer)
    assert torch.equal(torch.rand(3, device="cuda"), expected)


def test_unfinished_saves_are_removed_and_a_moved_aside_step_is_put_back(tmp_path, caplog):
    model, optimizer, _ = make_run()
    save_checkpoint(tmp_path, 2, model=model, optimizer=optimizer, data_state={})
    four = save_checkpoint(tmp_path, 4, model=model, optimizer=optimizer, data_state={})
    root = tmp_path / "checkpoints"
    killed = root / ".tmp-step-000006-ab12cd34"  # killed while writing step 6
    killed.mkdir()
    (killed / "model.safetensors").write_bytes(b"\0" * 3_000_000)
    aside = root / ".old-step-000004-ef56gh78"  # killed between the two renames of a second save of step 4
    aside.mkdir()
    four.rename(aside / four.name)
    replaced = root / ".old-step-000002-0a1b2c3d"  # killed after step 2's new copy took its place
    (replaced / "step-000002").mkdir(parents=True)
    with caplog.at_level(logging.WARNING):
        removed = ckpt.remove_unfinished_saves(tmp_path)
    assert removed == [replaced, aside, killed]
    assert sorted(p.name for p in root.iterdir()) == ["step-000002", "step-000004"]
    assert latest_checkpoint(tmp_path) == four
    assert f"removed {killed} (3.0 MB), left by a checkpoint save that did not finish" in caplog.text
    assert f"put back {four}" in caplog.text
    assert ckpt.remove_unfinished_saves(tmp_path / "no-run") == []


@pytest.mark.parametrize("resume", [False, True])
def test_a_fresh_or_resumed_run_removes_a_killed_save_before_its_model_loads(
    tmp_path, monkeypatch, caplog, resume
):
    from train_config import tiny_config

    from searchgym.agents.train import grpo

    if resume:
        model, optimizer, _ = make_run()
        save_checkpoint(tmp_path, 1, model=model, optimizer=optimizer, data_state={})
    killed = tmp_path / "checkpoints" / ".tmp-step-000000-x9y8z7w6"  # a 500 MB folder in real runs
    killed.mkdir(parents=True)
    (killed / "model.safetensors").write_bytes(b"half")

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        assert not killed.exists()  # removed before the model loads: nothing saves yet
        raise Stop

    monkeypatch.setattr(grpo, "load_policies", stop)
    with caplog.at_level(logging.WARNING), pytest.raises(Stop):
        grpo.train(tiny_config("smollm2-135m-instruct", tmp_path, resume=resume))
    assert f"removed {killed}" in caplog.text
