"""The sliding window's device memory paths: the out-of-memory fallback, ``--not_on_device`` and
the dtypes of ``--fp16_accumulation`` on CUDA.

CUDA cannot run here (torch is a CPU build). The fallback tests therefore let the CPU stand in
for the device (``device_fallback.can_fall_back`` patched to say yes) and inject the device's
failure where it would come from: the error a CUDA run raises, at the first tile's accumulation
(``sliding_window._add_tile`` patched) or in the network's forward pass. Each step that would
touch CUDA itself (``torch.cuda.empty_cache``) is checked through a recorder, never pretended to
have run.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import replace

import pytest
import torch

from nnunet_core.cli import build_parser
from nnunet_core.inference import device_fallback, sliding_window
from nnunet_core.inference.device_fallback import is_out_of_memory, results_device
from nnunet_core.inference.sliding_window import sliding_window_logits

PATCH = (8, 16, 16)
AXES = (0, 1, 2)
CUDA_OOM = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
ALLOCATOR_STATS = "Of the allocated memory 77.1 GiB is allocated by PyTorch"


def _net(outputs: int = 3) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Conv3d(1, outputs, 3, padding=1).eval()


def _case() -> torch.Tensor:
    return torch.randn((1, 12, 21, 18), generator=torch.Generator().manual_seed(1))


class _Failing(torch.nn.Module):
    """A network whose first forward pass raises ``error`` (the device's failure), after keeping
    a weak reference to its input (the tile batch on the device)."""

    def __init__(self, net: torch.nn.Module, error: BaseException | None) -> None:
        super().__init__()
        self.net, self.error, self.calls, self.inputs = net, error, 0, []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 1 and self.error is not None:
            self.inputs.append(weakref.ref(x))
            raise self.error
        return self.net(x)


@pytest.fixture
def device_stand_in(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The CPU plays the device: sums on it may fall back. Records what the fallback does."""
    seen: dict = {"released": [], "alive_at_release": None, "entries": []}
    monkeypatch.setattr(device_fallback, "can_fall_back", lambda _device: True)

    def release(device: torch.device) -> None:
        seen["alive_at_release"] = [r for r in seen.get("refs", []) if r() is not None]
        seen["released"].append(device)

    monkeypatch.setattr(device_fallback, "release_device_memory", release)
    return seen


def _spy_on_attempts(monkeypatch: pytest.MonkeyPatch, seen: dict) -> None:
    """Weak references to what the first attempt puts on the results device and to the network's
    (mirrored) output; each later attempt (the retry's entry point) records which of them are
    still alive when it starts."""
    real = sliding_window._on_results_device
    real_mirror = sliding_window.mirror_and_predict

    def on_results_device(data, gaussian, num_outputs, results):
        seen["entries"].append([r for r in seen.get("refs", []) if r() is not None])
        made = real(data, gaussian, num_outputs, results)
        if len(seen["entries"]) == 1:
            # a device copy is a new tensor; on the CPU .to() hands back the caller's own
            made = tuple(t.clone() for t in made)
            seen.setdefault("refs", []).extend(weakref.ref(t) for t in made)
        return made

    def mirror_and_predict(*args):
        prediction = real_mirror(*args)
        if len(seen["entries"]) == 1:
            seen["refs"].append(weakref.ref(prediction))
        return prediction

    monkeypatch.setattr(sliding_window, "_on_results_device", on_results_device)
    monkeypatch.setattr(sliding_window, "mirror_and_predict", mirror_and_predict)


@pytest.mark.parametrize(
    "make_error",
    [
        lambda: torch.cuda.OutOfMemoryError(f"{CUDA_OOM}\n{ALLOCATOR_STATS}"),
        lambda: RuntimeError(f"cuDNN error: CUDNN_STATUS_ALLOC_FAILED\n{ALLOCATOR_STATS}"),
        lambda: RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"),
    ],
    ids=["cuda-oom", "cudnn-alloc", "cublas-alloc"],
)
def test_oom_at_the_first_accumulation_frees_the_attempt_before_the_retry(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    device_stand_in: dict,
    make_error,
) -> None:
    """The error is made where it is raised, as torch makes it, so nothing else holds it."""
    error = make_error()
    error_text = str(error)
    net, data = _net(), _case()
    expected = sliding_window_logits(net, data, PATCH, 3, mirror_axes=AXES, batch_tiles=2)
    seen = device_stand_in
    _spy_on_attempts(monkeypatch, seen)
    real_add = sliding_window._add_tile

    def add_tile(logits, weights, tile_logits, weight, tile):
        if not seen.get("faulted"):  # the first tile of the first attempt: the device is full
            seen["faulted"] = True
            refs = (logits, weights, tile_logits, weight)  # as this step sees them
            seen["refs"].extend(weakref.ref(t) for t in refs)
            raise make_error()
        real_add(logits, weights, tile_logits, weight, tile)

    monkeypatch.setattr(sliding_window, "_add_tile", add_tile)
    logits = sliding_window_logits(net, data, PATCH, 3, mirror_axes=AXES, batch_tiles=2)

    # the case, the tile weights, the two sums, the batch's output; the failed step's four
    assert len(seen["refs"]) == 9
    assert len(seen["entries"]) == 2  # the attempt on the device, then one with CPU sums
    assert seen["alive_at_release"] == [], "the cache was emptied while the tensors were held"
    assert seen["entries"][1] == [], "the retry started beside the failed attempt's tensors"
    assert seen["released"] == [torch.device("cpu")]  # the stand-in device, once
    assert torch.equal(logits, expected)
    lines = capsys.readouterr().err.splitlines()
    first = error_text.splitlines()[0]
    assert [line for line in lines if "out of memory" in line] == [
        f"sliding window: out of memory with the sums on cpu ({type(error).__name__}: {first}); "
        "predicting this case again with them on the CPU (slower; --not_on_device starts there)"
    ]
    assert ALLOCATOR_STATS not in "\n".join(lines)


def test_oom_in_the_forward_pass_frees_the_tile_batch_too(
    monkeypatch: pytest.MonkeyPatch, device_stand_in: dict
) -> None:
    """Here the network keeps the error it raised (as a logger or a debugger may): its traceback
    then outlives the handler, and the failed frames' tensors must go all the same."""
    net, data = _net(), _case()
    expected = sliding_window_logits(net, data, PATCH, 3)
    seen = device_stand_in
    _spy_on_attempts(monkeypatch, seen)
    failing = _Failing(net, torch.cuda.OutOfMemoryError(CUDA_OOM))
    logits = sliding_window_logits(failing, data, PATCH, 3)
    refs = seen["refs"] + failing.inputs  # no output: the forward pass failed
    assert len(refs) == 5 and all(r() is None for r in refs)
    assert seen["alive_at_release"] == [] and seen["entries"][1] == []
    assert torch.equal(logits, expected)


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)"),
        RuntimeError("cuDNN error: CUDNN_STATUS_BAD_PARAM"),
        ValueError("out of memory"),  # says the words, but a device failure is a RuntimeError
    ],
)
def test_an_unrelated_error_propagates_unchanged(
    device_stand_in: dict, capsys: pytest.CaptureFixture, error: Exception
) -> None:
    failing = _Failing(_net(), error)
    with pytest.raises(type(error)) as raised:
        sliding_window_logits(failing, _case(), PATCH, 3)
    assert raised.value is error
    assert failing.calls == 1  # no second attempt
    assert device_stand_in["released"] == []
    assert capsys.readouterr().err == ""


def test_oom_with_the_sums_on_the_cpu_propagates() -> None:
    """Sums already on the CPU have nowhere to go (no stand-in here: the real predicate)."""
    error = torch.cuda.OutOfMemoryError(CUDA_OOM)
    failing = _Failing(_net(), error)
    with pytest.raises(torch.cuda.OutOfMemoryError) as raised:
        sliding_window_logits(failing, _case(), PATCH, 3)
    assert raised.value is error and failing.calls == 1


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (torch.cuda.OutOfMemoryError("anything"), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (RuntimeError("MPS backend out of memory (MPS allocated: 9 GB)"), True),
        (RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"), True),
        (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"), True),
        (RuntimeError("Unable to find a valid cuDNN algorithm to run convolution"), True),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), False),
        (RuntimeError("expected scalar type Half but found Float"), False),
        (ValueError("out of memory"), False),
    ],
)
def test_out_of_memory_is_recognised_by_type_or_message(error: Exception, expected: bool) -> None:
    assert is_out_of_memory(error) is expected


def test_release_empties_the_cuda_cache_only_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA cannot run here: ``torch.cuda.empty_cache`` is replaced by a recorder."""
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("emptied"))
    device_fallback.release_device_memory(torch.device("cpu"))
    assert calls == []
    device_fallback.release_device_memory(torch.device("cuda", 1))
    assert calls == ["emptied"]


# ------------------------------------------------------------------------------ --not_on_device
def test_not_on_device_puts_the_sums_on_the_cpu() -> None:
    cuda = torch.device("cuda", 0)
    assert results_device(cuda, on_device=True) == cuda
    assert results_device(cuda, on_device=False) == torch.device("cpu")


def test_the_sums_follow_the_flag_with_the_network_on_another_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The network goes to the ``meta`` device (CUDA's stand-in: real devices cannot run here,
    and meta tensors compute nothing), so the run is stopped where the sums are made, after
    recording their device."""

    class Stop(Exception):
        pass

    seen: list[torch.device] = []

    def on_results_device(*args):
        seen.append(args[-1])  # the results device
        raise Stop

    monkeypatch.setattr(sliding_window, "_on_results_device", on_results_device)
    for on_device in (True, False):
        with pytest.raises(Stop):
            sliding_window_logits(_net(), _case(), PATCH, 3, device="meta", on_device=on_device)
    assert seen == [torch.device("meta"), torch.device("cpu")]


def test_not_on_device_changes_no_number() -> None:
    net, data = _net(), _case()
    for accumulate in (torch.float32, torch.float16):
        on = sliding_window_logits(net, data, PATCH, 3, mirror_axes=(1,), accumulate=accumulate)
        off = sliding_window_logits(
            net, data, PATCH, 3, mirror_axes=(1,), accumulate=accumulate, on_device=False
        )
        assert on.dtype == accumulate and torch.equal(on, off)


@pytest.mark.parametrize("command", ["predict", "predict-from-modelfolder"])
def test_the_flag_reaches_the_prediction_settings(command: str) -> None:
    from nnunet_core.commands.predict import settings_from_args

    base = [command, "-i", "in", "-o", "out", "-m", "model", "-device", "cpu"]
    parser = build_parser(command)
    assert settings_from_args(parser.parse_args(base)).on_device is True
    assert settings_from_args(parser.parse_args([*base, "--not_on_device"])).on_device is False


def test_the_predictor_hands_the_flag_to_the_sliding_window(
    monkeypatch: pytest.MonkeyPatch, tmp_path, make_raw_dataset
) -> None:
    """One case of a tiny random-weight model (no training), inline, without mirroring."""
    from nnunet_core.inference import predictor
    from nnunet_core.inference.model_folder import load_trained_model
    from tests.helpers.model_folder import make_model

    raw = make_raw_dataset(tmp_path / "raw" / "Dataset900_Synth", num_training=1, num_test=1)
    dataset_json = json.loads((raw / "dataset.json").read_text())
    model = load_trained_model(make_model(tmp_path / "results", dataset_json, "3d_tiny", [0]), [0])
    cases = predictor.input_cases(raw / "imagesTs", model.dataset_json)
    real, seen = predictor.predict_logits_from_folds, []

    def spy(*args, **kwargs):
        logits = real(*args, **kwargs)
        seen.append((kwargs["on_device"], logits.clone()))
        return logits

    monkeypatch.setattr(predictor, "predict_logits_from_folds", spy)
    settings = predictor.PredictionSettings(
        use_mirroring=False, num_processes_preprocessing=0, num_processes_export=0, progress=False
    )
    for on_device in (True, False):
        out = tmp_path / f"on_device_{on_device}"
        predictor.predict_cases(model, cases, out, replace(settings, on_device=on_device))
    (on, on_logits), (off, off_logits) = seen
    assert (on, off) == (True, False)
    assert torch.equal(on_logits, off_logits)
