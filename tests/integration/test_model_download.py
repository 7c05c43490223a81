"""Downloading a model archive by URL: ``nnunet-core download-pretrained-model-by-url`` and the
workflow's ``cached_download`` (``nnunet_core.model_sharing.download``).

A real HTTP server on 127.0.0.1 (``http.server`` in a thread, a free port) serves the archive that
``export-model-to-zip`` makes of the fake results tree of ``tests/helpers/model_sharing.py``, and
the ways a download goes wrong: a 404, a body shorter than its ``Content-Length``, a page that is
no zip, a zip with a corrupt member, a redirect to ftp://. It counts the requests per path, so
the cache's "no second request" is observed at the server. Everything runs in-process
(``nnunet_core.cli.main``); plain http:// is accepted from this machine only, which is what lets
a local server stand in for an https:// host.
"""

from __future__ import annotations

import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nnunet_core.cli import main
from nnunet_core.errors import ConfigurationError
from nnunet_core.layout.new_scans import cached_download_path
from nnunet_core.model_sharing.download import (
    DownloadError,
    cached_download,
    download,
    url_sha256,
)
from tests.helpers.model_sharing import DATASET, files_under, make_results

COMMAND = "download-pretrained-model-by-url"
Respond = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Server:
    """The test server: ``routes`` maps a path to its response; ``requests`` counts per path."""

    base: str = ""
    routes: dict[str, Respond] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


def body(data: bytes, *, length: int | None = None, delay_s: float = 0.0) -> Respond:
    """A 200 response with ``data``, announcing ``length`` bytes (default: the real length)."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(delay_s)
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(data) if length is None else length))
        handler.end_headers()
        handler.wfile.write(data)

    return respond


def redirect(location: str) -> Respond:
    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return respond


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    state = Server()

    class Handler(BaseHTTPRequestHandler):  # HTTP/1.0: the connection closes after each reply
        def do_GET(self) -> None:
            state.requests[self.path] += 1
            respond = state.routes.get(self.path)
            if respond is None:
                self.send_error(404)
                return
            respond(self)

        def log_message(self, *_: object) -> None:  # no access log on the tests' stderr
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    state.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@dataclass(frozen=True)
class Model:
    results: Path  # the tree the archive was exported from
    archive: bytes


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, server: Server) -> Model:
    root = tmp_path_factory.mktemp("model_download")
    results = make_results(root / "results")
    archive = root / "model.zip"
    export = ["export-model-to-zip", "-d", DATASET, "-o", str(archive), "--results", str(results)]
    assert main([*export, "-c", "2d", "-f", "0"]) == 0
    data = archive.read_bytes()
    stored = root / "stored.zip"
    with zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as handle:
        handle.writestr("plans.json", b"{}" * 64)
    corrupt = bytearray(stored.read_bytes())
    corrupt[30 + len("plans.json") + 5] ^= 0xFF  # a byte of the member's data: its CRC fails
    with zipfile.ZipFile(stored, "w") as handle:  # a sound zip the install must refuse
        handle.writestr("../evil.txt", b"outside the results root")
    unsafe = stored.read_bytes()
    server.routes.update(
        {
            "/model.zip": body(data),
            "/truncated.zip": body(data[: len(data) // 2], length=len(data)),
            "/page.html": body(b"<html><body>Sign in to download</body></html>"),
            "/corrupt.zip": body(bytes(corrupt)),
            "/unsafe.zip": body(unsafe),
            "/to-ftp": redirect("ftp://127.0.0.1/model.zip"),
        }
    )
    return Model(results, data)


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"nnunet-core {COMMAND}: error: "), err
    return err


def test_the_command_downloads_and_installs_the_archive(
    server: Server, model: Model, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = server.url("/model.zip")
    installed = tmp_path / "installed"
    assert main([COMMAND, url, "--results", str(installed)]) == 0
    out = capsys.readouterr().out
    assert f"downloaded {url}: " in out
    assert f"installed {DATASET} into {installed}" in out
    got = files_under(installed)
    archive = tmp_path / "served.zip"
    archive.write_bytes(model.archive)
    with zipfile.ZipFile(archive) as handle:  # every member installed, byte for byte
        assert got == {name: handle.read(name) for name in handle.namelist()}
    checkpoints = [name for name in got if name.endswith(".pth")]
    assert checkpoints  # the same weights as the tree the archive was made from
    assert all(got[name] == (model.results / name).read_bytes() for name in checkpoints)
    assert [p.name for p in installed.iterdir()] == [DATASET]  # the download folder is gone


@pytest.mark.parametrize(
    ("path", "code", "reason"),
    [
        ("/missing.zip", 2, "HTTP 404 Not Found"),
        ("/truncated.zip", 1, "truncated download"),
        ("/page.html", 2, "not a zip archive"),
        ("/corrupt.zip", 2, "fails its CRC check"),
        ("/to-ftp", 2, "redirected to ftp://127.0.0.1/model.zip: refused"),
        ("/unsafe.zip", 2, "member '../evil.txt' climbs out"),  # the install's own check
    ],
    ids=["404", "truncated", "not-a-zip", "corrupt-member", "redirect-to-ftp", "install-refuses"],
)
def test_a_failed_download_is_one_line_and_installs_nothing(
    server: Server,
    model: Model,  # noqa: ARG001 - registers the routes
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    path: str,
    code: int,
    reason: str,
) -> None:
    url = server.url(path)
    results = tmp_path / "results"
    assert main([COMMAND, url, "--results", str(results)]) == code
    err = one_line_error(capsys)
    assert f"error: {url}: " in err and reason in err, err
    assert ".install-" not in err  # named by its URL, not by the deleted temporary file
    assert list(results.iterdir()) == []  # the results root holds nothing, not even the download


@pytest.mark.parametrize("path", ["/truncated.zip", "/page.html"])
def test_download_leaves_no_file_behind(
    server: Server,
    model: Model,  # noqa: ARG001 - registers the routes
    tmp_path: Path,
    path: str,
) -> None:
    destination = tmp_path / "cache" / "model.zip"
    with pytest.raises((DownloadError, ConfigurationError), match=server.url(path)):
        download(server.url(path), destination, progress=False)
    assert list(destination.parent.iterdir()) == []  # no partial file either


def test_an_existing_destination_survives_a_failed_download(
    server: Server,
    model: Model,  # noqa: ARG001 - registers the routes
    tmp_path: Path,
) -> None:
    destination = tmp_path / "model.zip"
    destination.write_bytes(b"the previous version")
    with pytest.raises(DownloadError, match="truncated download"):
        download(server.url("/truncated.zip"), destination, progress=False)
    assert destination.read_bytes() == b"the previous version"
    assert [p.name for p in tmp_path.iterdir()] == ["model.zip"]


def test_progress_lines_without_a_terminal(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = tmp_path / "big.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as handle:
        handle.writestr("weights.bin", bytes(3 << 20))  # 3 MiB: three 1 MiB blocks and a bit
    server.routes["/big.zip"] = body(archive.read_bytes())
    url = server.url("/big.zip")
    download(url, tmp_path / "got.zip", progress=False)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"downloading {url}: 33% (1.0 of 3.0 MiB)",
        f"downloading {url}: 66% (2.0 of 3.0 MiB)",
        f"downloading {url}: 99% (3.0 of 3.0 MiB)",
    ]
    assert len(lines) == 4 and lines[3].startswith(f"downloaded {url}: 3.0 MiB in 0:00:0")
    assert (tmp_path / "got.zip").read_bytes() == archive.read_bytes()


def test_cached_download_requests_a_url_once(server: Server, model: Model, tmp_path: Path) -> None:
    server.routes["/cached.zip"] = body(model.archive)
    url = server.url("/cached.zip")
    cache = tmp_path / "downloads"
    first = cached_download(url, cache, progress=False)
    assert first == cache / f"{url_sha256(url)[:16]}.zip"
    assert first == cached_download_path(cache, url_sha256(url))
    assert first.read_bytes() == model.archive
    assert cached_download(url, cache, progress=False) == first
    assert server.requests["/cached.zip"] == 1  # the second call made no request
    first.write_bytes(b"damaged")  # a file that is no zip is downloaded again
    assert cached_download(url, cache, progress=False).read_bytes() == model.archive
    assert server.requests["/cached.zip"] == 2


def test_two_concurrent_cached_downloads_make_one_request(
    server: Server, model: Model, tmp_path: Path
) -> None:
    """Two threads stand in for two jobs: ``flock`` locks of two open files conflict within one
    process as between two. The slow reply makes both ask while the first downloads."""
    server.routes["/slow.zip"] = body(model.archive, delay_s=0.3)
    url = server.url("/slow.zip")
    got: list[Path] = []
    threads = [
        threading.Thread(target=lambda: got.append(cached_download(url, tmp_path, progress=False)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 2 and got[0] == got[1] and got[0].read_bytes() == model.archive
    assert server.requests["/slow.zip"] == 1


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/model.zip",
        "file:///etc/passwd",
        "http://example.com/model.zip",
        "http://10.0.0.1/model.zip",
        "model.zip",
    ],
)
def test_other_schemes_and_remote_http_are_refused(url: str, tmp_path: Path) -> None:
    cache = tmp_path / "downloads"
    with pytest.raises(ConfigurationError) as caught:
        cached_download(url, cache)
    message = str(caught.value)
    assert message.startswith(f"{url}: refused: only https://") and "\n" not in message
    assert not cache.exists()


def test_the_command_refuses_remote_http_before_writing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://example.com/model.zip"
    results = tmp_path / "results"
    assert main([COMMAND, url, "--results", str(results)]) == 2
    assert f"error: {url}: refused" in one_line_error(capsys)
    assert not results.exists()
