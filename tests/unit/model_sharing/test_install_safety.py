"""Installing never changes an installed model silently (issue 51 part 3), in-process.

Real zips written in ``tmp_path`` and installed through ``nnunet_core.cli.main``: a replacing
member is refused unless ``--overwrite`` (which lists each replaced file), trainer code never
enters a built-in trainer's folder or an installed folder without a record, a record must match
its carried file, zip bombs are refused from their headers, and a lying header never unpacks
more than it declares. After every refusal the results tree is byte for byte what it was and no
staging folder is left. The real CLI's exit codes, stale staging and consent at predict are in
``tests/integration/test_model_install_safety.py``.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path

import pytest

from nnunet_core.cli import main
from tests.helpers.model_sharing import files_under

BUILTIN = "Dataset901_Tiny/nnUNetTrainer__nnUNetPlans__3d_fullres"
USER = "Dataset901_Tiny/MyTrainer__nnUNetPlans__3d_fullres"
SOURCE = b"from nnunet_core import Trainer\n\n\nclass MyTrainer(Trainer):\n    pass\n"
COMMAND = "install-pretrained-model-from-zip"


def make_zip(path: Path, entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as handle:
        for name, data in entries.items():
            handle.writestr(name, data)
    return path


def record(source: bytes = SOURCE, name: str = "my_trainer.py") -> bytes:
    entry = {
        "trainer": f"/home/u/{name}:MyTrainer",
        "class": "MyTrainer",
        "found_by": "file",
        "module": None,
        "original_file": f"/home/u/{name}",
        "source": f"trainer_source/{name}",
        "sha256": hashlib.sha256(source).hexdigest(),
    }
    return json.dumps(entry).encode()


def user_model(source: bytes = SOURCE, sha_of: bytes | None = None) -> dict[str, bytes]:
    return {
        f"{USER}/plans.json": b'{"plans_name": "nnUNetPlans"}',
        f"{USER}/fold_0/checkpoint_final.pth": b"weights of my trainer",
        f"{USER}/trainer.json": record(source if sha_of is None else sha_of),
        f"{USER}/trainer_source/my_trainer.py": source,
    }


def install(archive: Path, results: Path, *flags: str) -> int:
    return main([COMMAND, str(archive), "--results", str(results), *flags])


def one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"nnunet-core {COMMAND}: error: "), captured.err
    return captured.err


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """A results root with an installed built-in model and a decoy file beside it."""
    root = tmp_path / "results"
    model = root / BUILTIN
    (model / "fold_0").mkdir(parents=True)
    (model / "plans.json").write_text('{"plans_name": "nnUNetPlans"}')
    (model / "fold_0" / "checkpoint_final.pth").write_bytes(b"installed weights")
    (root / "decoy.txt").write_text("the user's file")
    return root


def assert_unchanged(root: Path, before: dict[str, bytes]) -> None:
    assert files_under(root) == before
    assert not list(root.glob(".install-*"))


# ------------------------------------------------------------------- trainer code and takeover
@pytest.mark.parametrize("flags", [(), ("--overwrite",)], ids=["plain", "overwrite"])
def test_code_into_an_installed_builtin_model_is_refused(results, tmp_path, capsys, flags) -> None:
    """The probe of issue 51: two members that would make a built-in model run their code."""
    archive = make_zip(
        tmp_path / "takeover.zip",
        {f"{BUILTIN}/trainer.json": record(), f"{BUILTIN}/trainer_source/my_trainer.py": SOURCE},
    )
    before = files_under(results)
    assert install(archive, results, *flags) == 2
    err = one_line_error(capsys)
    assert f"{archive}: member '{BUILTIN}/trainer.json' brings trainer code into" in err
    assert "the built-in trainer nnUNetTrainer" in err and "nothing was installed" in err
    assert_unchanged(results, before)


@pytest.mark.parametrize("member", ["trainer.json", "trainer_source/x.py", "trainer_source/"])
def test_code_into_a_new_builtin_model_folder_is_refused(tmp_path, capsys, member) -> None:
    folder = "Dataset902_B/nnUNetTrainer_250epochs__nnUNetPlans__2d"
    archive = make_zip(
        tmp_path / "m.zip", {f"{folder}/plans.json": b"{}", f"{folder}/{member}": b""}
    )
    root = tmp_path / "results"
    assert install(archive, root) == 2
    assert "built-in trainer nnUNetTrainer_250epochs" in one_line_error(capsys)
    assert not root.exists()


def test_a_record_added_to_an_installed_folder_without_one_is_refused(tmp_path, capsys) -> None:
    root = tmp_path / "results"
    (root / USER).mkdir(parents=True)
    (root / USER / "plans.json").write_text("installed plans")
    before = files_under(root)
    archive = make_zip(tmp_path / "m.zip", {f"{USER}/trainer.json": record()})
    for flags in ((), ("--overwrite",)):
        assert install(archive, root, *flags) == 2
        err = one_line_error(capsys)
        where = f"would add trainer code to the installed folder {root / USER}, which has none"
        assert where in err
        assert_unchanged(root, before)


def test_a_new_user_model_installs_and_names_its_code(tmp_path, capsys) -> None:
    archive = make_zip(tmp_path / "m.zip", user_model())
    root = tmp_path / "results"
    assert install(archive, root) == 0
    out = capsys.readouterr().out.splitlines()
    digest = hashlib.sha256(SOURCE).hexdigest()
    source = root / USER / "trainer_source" / "my_trainer.py"
    assert out == [
        f"installed Dataset901_Tiny into {root}",
        f"model {root / USER} carries trainer code {source} (sha256 {digest}); predict runs it "
        "only with --trust-model-code",
    ]
    assert source.read_bytes() == SOURCE


def test_a_record_that_does_not_match_its_code_is_refused(tmp_path, capsys) -> None:
    archive = make_zip(tmp_path / "m.zip", user_model(SOURCE + b"import os\n", sha_of=SOURCE))
    root = tmp_path / "results"
    assert install(archive, root) == 2
    err = one_line_error(capsys)
    assert "my_trainer.py has sha256" in err and "changed after training" in err
    assert "nothing was installed" in err and ".install-" not in err
    assert list(root.iterdir()) == []


def test_replacing_a_user_models_code_needs_overwrite_and_is_listed(tmp_path, capsys) -> None:
    root = tmp_path / "results"
    assert install(make_zip(tmp_path / "v1.zip", user_model()), root) == 0
    capsys.readouterr()
    before = files_under(root)
    changed = SOURCE + b"# v2\n"
    archive = make_zip(tmp_path / "v2.zip", user_model(changed))
    assert install(archive, root) == 2
    err = one_line_error(capsys)
    assert "would replace 2 installed file(s)" in err
    assert f"{USER}/trainer.json" in err and f"{USER}/trainer_source/my_trainer.py" in err
    assert_unchanged(root, before)
    assert install(archive, root, "--overwrite") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == [
        f"replaced {root / USER / 'trainer.json'}",
        f"replaced {root / USER / 'trainer_source' / 'my_trainer.py'}",
    ]
    assert hashlib.sha256(changed).hexdigest() in out[-1]
    assert (root / USER / "trainer_source" / "my_trainer.py").read_bytes() == changed


# --------------------------------------------------------------------------- replacing files
def test_reinstalling_the_same_archive_changes_nothing_and_needs_no_flag(tmp_path, capsys) -> None:
    archive = make_zip(tmp_path / "m.zip", user_model())
    root = tmp_path / "results"
    assert install(archive, root) == 0
    before = files_under(root)
    capsys.readouterr()
    assert install(archive, root) == 0
    assert not any(line.startswith("replaced") for line in capsys.readouterr().out.splitlines())
    assert_unchanged(root, before)


def test_overwrite_lists_each_replaced_file_and_keeps_the_others(results, tmp_path, capsys) -> None:
    entries = {
        f"{BUILTIN}/plans.json": b"new plans",
        f"{BUILTIN}/fold_0/checkpoint_final.pth": b"other weights",
        f"{BUILTIN}/fold_1/checkpoint_final.pth": b"a new fold",
        "decoy.txt": b"replaced decoy",
    }
    archive = make_zip(tmp_path / "m.zip", entries)
    before = files_under(results)
    assert install(archive, results) == 2
    err = one_line_error(capsys)
    assert "would replace 3 installed file(s)" in err and "decoy.txt" in err
    assert_unchanged(results, before)
    assert install(archive, results, "--overwrite") == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"replaced {results / BUILTIN / 'fold_0' / 'checkpoint_final.pth'}",
        f"replaced {results / BUILTIN / 'plans.json'}",
        f"replaced {results / 'decoy.txt'}",
        f"installed Dataset901_Tiny, decoy.txt into {results}",
    ]
    assert files_under(results) == {**before, **entries}


# ------------------------------------------------------------------------------- zip bombs
def test_a_highly_compressed_member_is_refused_before_extraction(tmp_path, capsys) -> None:
    archive = make_zip(tmp_path / "bomb.zip", {"Dataset1_A/M/filler.bin": bytes(20 << 20)})
    assert archive.stat().st_size < 100_000
    root = tmp_path / "results"
    assert install(archive, root) == 2
    err = one_line_error(capsys)
    member = "member 'Dataset1_A/M/filler.bin' declares an unpacked size of 0.02 GiB"
    assert f"{archive}: {member}" in err
    assert "the limit is 200:1; --max-ratio raises it" in err and not root.exists()
    assert install(archive, root, "--max-ratio", "5000") == 0
    assert (root / "Dataset1_A" / "M" / "filler.bin").stat().st_size == 20 << 20


def test_the_total_size_is_limited_and_the_flag_raises_it(tmp_path, capsys) -> None:
    chunk = bytes(range(256)) * 4096 * 3  # 3 MiB each, stored
    entries = {f"Dataset1_A/M/part{i}.bin": chunk for i in range(4)}
    archive = make_zip(tmp_path / "big.zip", entries, zipfile.ZIP_STORED)
    root = tmp_path / "results"
    assert install(archive, root, "--max-size-gb", "0.01") == 2
    err = one_line_error(capsys)
    assert f"{archive}: would unpack 0.01 GiB in 4 members (the limit is 0.01 GiB" in err
    assert "--max-size-gb raises it" in err and not root.exists()
    assert install(archive, root, "--max-size-gb", "0.02") == 0
    assert len(list((root / "Dataset1_A" / "M").iterdir())) == 4


def _declare_size(archive: Path, size: int) -> None:
    """Rewrite the (single) member's uncompressed size in both its headers."""
    data = bytearray(archive.read_bytes())
    struct.pack_into("<I", data, data.index(b"PK\x01\x02") + 24, size)
    struct.pack_into("<I", data, data.index(b"PK\x03\x04") + 22, size)
    archive.write_bytes(bytes(data))


def test_a_header_declaring_a_huge_size_is_refused_unread(tmp_path, capsys) -> None:
    archive = make_zip(tmp_path / "liar.zip", {"Dataset1_A/M/x.bin": b"tiny"})
    _declare_size(archive, 0xFFFF_FFF0)  # ~4 GiB from 4 bytes
    root = tmp_path / "results"
    assert install(archive, root, "--max-ratio", "1e12", "--max-size-gb", "1") == 2
    assert "would unpack 4.00 GiB in 1 members (the limit is 1 GiB" in one_line_error(capsys)
    assert not root.exists()


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_a_header_understating_a_member_never_yields_more_than_declared(
    tmp_path, capsys, method
) -> None:
    """The claim the size limits rest on: zipfile hands out at most the declared size."""
    data = bytes(range(256)) * 400
    archive = make_zip(tmp_path / "liar.zip", {"Dataset1_A/M/x.bin": data}, method)
    _declare_size(archive, 1000)
    with zipfile.ZipFile(archive) as handle, handle.open("Dataset1_A/M/x.bin") as member:
        got = bytearray()
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            while block := member.read1(64):
                got += block
        assert len(got) <= 1000
    root = tmp_path / "results"
    assert install(archive, root) == 2
    err = one_line_error(capsys)
    assert "'Dataset1_A/M/x.bin' is corrupt (Bad CRC-32" in err and "nothing was installed" in err
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("flags", [("--max-size-gb", "0"), ("--max-ratio", "0.5")])
def test_limits_must_be_positive(tmp_path, capsys, flags) -> None:
    archive = make_zip(tmp_path / "m.zip", {"Dataset1_A/x.json": b"{}"})
    assert install(archive, tmp_path / "results", *flags) == 2
    assert "--max-size-gb must be > 0 and --max-ratio >= 1" in one_line_error(capsys)
