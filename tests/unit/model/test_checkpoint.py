"""Checkpoints: weights_only round trips, atomic saves under failure and kill, resume order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from nnunet_core.model import checkpoint as ckpt
from nnunet_core.model.checkpoint import (
    CheckpointError,
    find_resume_checkpoint,
    load_checkpoint,
    load_pretrained_weights,
    remove_stale_temporaries,
    save_checkpoint,
)


class TinyNet(nn.Module):
    def __init__(self, heads: int = 3) -> None:
        super().__init__()
        self.body = nn.Conv2d(1, 4, 3)
        self.decoder = nn.Module()
        self.decoder.heads = nn.ModuleList([nn.Conv2d(4, heads, 1)])


def training_state(net: nn.Module, epoch: int = 3) -> dict:
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.99, nesterov=True)
    net.body(torch.randn(1, 1, 5, 5)).sum().backward()
    optimizer.step()
    return {
        "network_weights": net.state_dict(),
        "optimizer_state": optimizer.state_dict(),
        "grad_scaler_state": None,
        "logging": {"train_losses": [0.5, 0.4], "mean_fg_dice": [float("nan"), 0.2]},
        "_best_ema": 0.2,
        "current_epoch": epoch,
        "init_args": {"plans": {"a": [1, 2]}, "configuration": "3d", "fold": 0},
        "trainer_name": "nnUNetTrainer",
        "inference_allowed_mirroring_axes": (0, 1),
    }


def test_round_trip_with_weights_only(tmp_path: Path) -> None:
    net = TinyNet()
    state = training_state(net)
    path = save_checkpoint(state, tmp_path / "checkpoint_latest.pth")
    # plain torch.load with weights_only=True must work (no code runs when opening it)
    raw = torch.load(path, weights_only=True)
    loaded = load_checkpoint(path)
    assert raw.keys() == loaded.keys() == state.keys()
    for key, value in net.state_dict().items():
        assert torch.equal(loaded["network_weights"][key], value)
    restored = torch.optim.SGD(TinyNet().parameters(), lr=1.0)
    restored.load_state_dict(loaded["optimizer_state"])
    buffers = [s["momentum_buffer"] for s in restored.state.values()]
    assert len(buffers) == 2 and all(b.abs().sum() > 0 for b in buffers)
    assert loaded["current_epoch"] == 3
    assert not list(tmp_path.glob(".*"))  # no temporary left behind


def test_non_plain_values_are_refused_before_writing(tmp_path: Path) -> None:
    state = training_state(TinyNet())
    state["logging"]["extra"] = np.zeros(3)
    target = tmp_path / "checkpoint_best.pth"
    with pytest.raises(CheckpointError, match=r"logging.*extra.*ndarray"):
        save_checkpoint(state, target)
    assert not target.exists()


@pytest.mark.parametrize(
    "content", [b"", b"not a checkpoint at all", b"PK\x03\x04 truncated zip"], ids=str
)
def test_corrupted_file_gives_a_one_line_error_naming_it(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "checkpoint_latest.pth"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert str(path) in message and "corrupted" in message
    assert "\n" not in message


def test_truncated_checkpoint_gives_a_clear_error(tmp_path: Path) -> None:
    path = save_checkpoint(training_state(TinyNet()), tmp_path / "checkpoint_final.pth")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="checkpoint_final.pth: corrupted"):
        load_checkpoint(path)


def test_arbitrary_pickles_are_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint_best.pth"
    torch.save({"network_weights": {}, "payload": Path("/etc")}, path)  # not allow-listed
    with pytest.raises(CheckpointError, match="corrupted or not a checkpoint"):
        load_checkpoint(path)


def test_failed_rename_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "checkpoint_latest.pth"
    save_checkpoint(training_state(TinyNet(), epoch=1), target)

    def failing_replace(_src, _dst):
        raise OSError("disk vanished")

    monkeypatch.setattr(ckpt.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk vanished"):
        save_checkpoint(training_state(TinyNet(), epoch=2), target)
    monkeypatch.undo()
    assert load_checkpoint(target)["current_epoch"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint_latest.pth"]


def test_failure_while_writing_leaves_the_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "checkpoint_latest.pth"
    save_checkpoint(training_state(TinyNet(), epoch=1), target)

    def half_write(_obj, handle):
        handle.write(b"PK\x03\x04 half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.torch, "save", half_write)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(training_state(TinyNet(), epoch=2), target)
    monkeypatch.undo()
    assert load_checkpoint(target)["current_epoch"] == 1
    assert not list(tmp_path.glob(".*"))


WRITER = textwrap.dedent(
    """
    import sys, torch
    from nnunet_core.model.checkpoint import save_checkpoint
    target = sys.argv[1]
    weights = {"w": torch.randn(2_000_000)}
    epoch = 0
    while True:
        epoch += 1
        save_checkpoint({"network_weights": weights, "current_epoch": epoch}, target)
        print(epoch, flush=True)
    """
)


def test_sigkill_during_saves_leaves_a_loadable_checkpoint(tmp_path: Path) -> None:
    """A real process rewriting an 8 MB checkpoint in a loop, killed at several moments."""
    target = tmp_path / "checkpoint_latest.pth"
    rng = np.random.default_rng(0)
    last_epoch = 0
    for _ in range(2):
        process = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True
        )
        assert process.stdout is not None
        first = process.stdout.readline()  # one save completed
        assert first.strip()
        time.sleep(float(rng.uniform(0.0, 0.3)))
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        state = load_checkpoint(target)
        assert state["current_epoch"] >= 1
        assert state["network_weights"]["w"].shape == (2_000_000,)
        last_epoch = state["current_epoch"]
        remove_stale_temporaries(tmp_path)
        assert [p.name for p in tmp_path.iterdir()] == ["checkpoint_latest.pth"]
    assert last_epoch >= 1


def test_resume_order_is_final_latest_best(tmp_path: Path) -> None:
    for name in ("checkpoint_best.pth", "checkpoint_latest.pth", "checkpoint_final.pth"):
        (tmp_path / name).write_bytes(b"x")
    assert find_resume_checkpoint(tmp_path).name == "checkpoint_final.pth"
    (tmp_path / "checkpoint_final.pth").unlink()
    assert find_resume_checkpoint(tmp_path).name == "checkpoint_latest.pth"
    (tmp_path / "checkpoint_latest.pth").unlink()
    assert find_resume_checkpoint(tmp_path).name == "checkpoint_best.pth"
    (tmp_path / "checkpoint_best.pth").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fresh fold is normal: no warning in its log
        assert find_resume_checkpoint(tmp_path) is None


def test_pretrained_weights_skip_heads_of_another_label_count(tmp_path: Path) -> None:
    source = TinyNet(heads=5)
    path = save_checkpoint(training_state(source), tmp_path / "checkpoint_final.pth")
    target = TinyNet(heads=3)
    head_before = target.decoder.heads[0].weight.clone()
    skipped = load_pretrained_weights(target, path)
    assert skipped == ["decoder.heads.0.weight", "decoder.heads.0.bias"]
    assert torch.equal(target.body.weight, source.body.weight)
    assert torch.equal(target.decoder.heads[0].weight, head_before)


def test_pretrained_weights_of_another_architecture_are_an_error(tmp_path: Path) -> None:
    other = nn.Module()
    other.body = nn.Conv2d(1, 8, 3)
    path = save_checkpoint({"network_weights": other.state_dict()}, tmp_path / "c.pth")
    with pytest.raises(CheckpointError, match=r"body.weight.*shape"):
        load_pretrained_weights(TinyNet(), path)


def test_pretrained_weights_accept_ddp_and_compile_prefixes(tmp_path: Path) -> None:
    """Upstream's rule: the heads start fresh even where the label count is the same."""
    source = TinyNet()
    weights = {f"module._orig_mod.{k}": v for k, v in source.state_dict().items()}
    path = save_checkpoint({"network_weights": weights}, tmp_path / "c.pth")
    target = TinyNet()
    head_before = target.decoder.heads[0].weight.clone()
    assert load_pretrained_weights(target, path) == [
        "decoder.heads.0.weight",
        "decoder.heads.0.bias",
    ]
    assert torch.equal(target.body.weight, source.body.weight)
    assert torch.equal(target.decoder.heads[0].weight, head_before)


def test_upstream_checkpoints_numpy_scalars_load_as_python_floats(tmp_path: Path) -> None:
    """Upstream's logger stores numpy float64 means and ``_best_ema``: allowed, nothing else."""
    state = training_state(TinyNet())
    state["_best_ema"] = np.float64(0.25)
    state["logging"]["ema_fg_dice"] = [np.float64(0.1), np.float32(0.2)]
    state["init_args"]["device"] = torch.device("cpu")
    path = tmp_path / "upstream.pth"
    torch.save(state, path)
    loaded = load_checkpoint(path)
    assert loaded["_best_ema"] == 0.25 and type(loaded["_best_ema"]) is float
    assert [type(v) for v in loaded["logging"]["ema_fg_dice"]] == [float, float]
    assert loaded["init_args"]["device"] == torch.device("cpu")


def test_a_type_upstream_never_writes_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "other.pth"
    torch.save({"network_weights": {}, "count": np.int64(3)}, path)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "needs numpy.dtypes.Int64DType, which no nnU-Net checkpoint holds" in message


class _Hostile:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_hostile_checkpoint_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    path = tmp_path / "hostile.pth"
    torch.save({"network_weights": {}, "init_args": _Hostile(marker)}, path)
    with pytest.raises(CheckpointError, match=r"needs posix\.system.*could run code"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"needs posix\.system"):
        load_pretrained_weights(TinyNet(), path)
    assert not marker.exists()


KILLED_ATOMIC_WRITER = """
import os, sys
from nnunet_core.io.atomic import atomic_path
with atomic_path(sys.argv[1], suffix=sys.argv[2]) as tmp:
    tmp.write_bytes(b"half")
    os._exit(0)  # killed inside the write: no rename, no clean-up
"""


def test_stale_temporaries_of_killed_atomic_writers_are_removed(tmp_path: Path) -> None:
    """A training job killed while writing progress.png (found by the fault campaign) left
    ``.progress.png.<random>.png`` behind, which the rerun kept; the next start removes it."""
    for name, suffix in (("progress.png", ".png"), ("debug.json", ".json")):
        subprocess.run(
            [sys.executable, "-c", KILLED_ATOMIC_WRITER, str(tmp_path / name), suffix], check=True
        )
    (tmp_path / "progress.png").write_bytes(b"png")
    (tmp_path / ".keep").write_bytes(b"")  # not an io.atomic temporary: kept
    (tmp_path / "validation").mkdir()
    (tmp_path / "validation" / "case.nii.gz").write_bytes(b"x")
    left = sorted(p.name for p in tmp_path.iterdir())
    assert any(n.startswith(".progress.png.") and n.endswith(".png") for n in left), left
    assert any(n.startswith(".debug.json.") and n.endswith(".json") for n in left), left
    removed = remove_stale_temporaries(tmp_path)
    assert len(removed) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".keep", "progress.png", "validation"]
    assert (tmp_path / "validation" / "case.nii.gz").exists()
