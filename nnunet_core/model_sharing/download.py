"""Downloading a model archive from a URL (upstream's ``nnUNetv2_download_pretrained_model_by_url``
and the prediction mode's ``predict.model: https://...``).

Only ``https://`` is fetched; plain ``http://`` only from this machine (``localhost``,
``127.0.0.1``, ``::1``: a local mirror, and the tests' server), because a model archive is code
and weights that nobody on the way may swap. Any other scheme (``file://``, ``ftp://``) or plain
``http://`` to another host is refused in one line naming the URL, also when a server redirects
there. The body is streamed with the standard library (no new dependency) in 1 MiB blocks to a
temporary beside the destination and renamed onto it only when complete (``io.atomic``): its
length is checked against ``Content-Length`` (``http.client`` ends a cut connection silently,
as if the body were complete) and it must be a zip whose every member passes its CRC check.
So a truncated, failed or non-zip download leaves nothing at the destination.

Errors are one line naming the URL: ``ConfigurationError`` (exit 2, not retried) for what a retry
cannot fix (a refused URL, HTTP 4xx, a body that is not a zip), ``DownloadError`` (exit 1,
retried) for what it may (the network, HTTP 5xx, 408, 429, a cut connection).

``cached_download`` is the workflow's cache: one file per URL, named by the URL's sha256
(``layout.new_scans``), downloaded once under a lock so that two jobs never fetch it together.
"""

from __future__ import annotations

import hashlib
import http.client
import sys
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from nnunet_core import __version__
from nnunet_core.errors import ConfigurationError, NnunetCoreError
from nnunet_core.io.atomic import atomic_path
from nnunet_core.io.locks import held
from nnunet_core.io.removal import remove_file
from nnunet_core.layout.new_scans import cached_download_path, download_lock_path
from nnunet_core.runtime.case_progress import format_duration, wants_bar

BLOCK = 1 << 20
TIMEOUT_S = 60.0  # per connect or read: a stalled server is an error, not a hang
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
RETRIED_CLIENT_ERRORS = frozenset({408, 429})  # timeout, too many requests: a retry may pass
LINE_PERCENT = 10  # without a bar: a line per 10 % ...
LINE_INTERVAL_S = 30.0  # ... or per 30 s, whichever comes first
MIB = float(1 << 20)


class DownloadError(NnunetCoreError):
    """The download failed in a way a second attempt may not (network, server, cut body)."""

    exit_code = 1


def check_url(url: str) -> None:
    """Refuse (``ConfigurationError``) a URL that is not ``https://`` or local ``http://``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # a malformed port or IPv6 address
        raise ConfigurationError(f"{url}: not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme == "https" and host:
        return
    if scheme == "http" and host in LOCAL_HOSTS:
        return
    msg = (
        f"{url}: refused: only https:// URLs are downloaded (http:// only from this machine: "
        f"{', '.join(sorted(LOCAL_HOSTS))})"
    )
    raise ConfigurationError(msg)


def url_sha256(url: str) -> str:
    """The key of a URL in a download cache (``layout.new_scans.download_path``)."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to a URL that ``check_url`` accepts (urllib alone follows
    https:// to plain http:// or ftp://)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        try:
            check_url(newurl)
        except ConfigurationError as exc:
            refused = f"{req.full_url}: redirected to {exc}"
            raise ConfigurationError(refused) from None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
    return str(reason) or type(exc).__name__


def _open(url: str) -> http.client.HTTPResponse:
    """The server's response to a GET of ``url`` (status 2xx), else a one-line error."""
    handlers: list[urllib.request.BaseHandler] = [_CheckedRedirects()]
    if urlsplit(url).hostname in LOCAL_HOSTS:
        handlers.append(urllib.request.ProxyHandler({}))  # a proxy cannot reach our localhost
    opener = urllib.request.build_opener(*handlers)
    request = urllib.request.Request(url, headers={"User-Agent": f"nnunet-core/{__version__}"})
    try:
        return opener.open(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        exc.close()
        error: type[NnunetCoreError] = DownloadError
        if 400 <= exc.code < 500 and exc.code not in RETRIED_CLIENT_ERRORS:
            error = ConfigurationError
        raise error(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise DownloadError(f"{url}: cannot connect ({_reason(exc)})") from None
    except (OSError, http.client.HTTPException) as exc:  # a timeout, a reset during the headers
        raise DownloadError(f"{url}: download failed ({_reason(exc)})") from None


def _content_length(response: http.client.HTTPResponse) -> int | None:
    value = response.headers.get("Content-Length")
    try:
        length = int(value) if value is not None else None
    except ValueError:
        return None
    return length if length is not None and length >= 0 else None


class _Progress:
    """A tqdm bar on stderr in a terminal; else a line on stdout per 10 % or 30 s and at the
    end (as ``runtime.case_progress``: a bar in a log file is carriage-return garbage)."""

    def __init__(self, url: str, total: int | None, bar: bool | None) -> None:
        self.url, self.total, self.done = url, total, 0
        self.start = self.last_line = time.monotonic()
        self.next_percent = LINE_PERCENT
        self.bar = None
        if wants_bar(bar):
            from tqdm import tqdm

            self.bar = tqdm(
                total=total, desc="download", unit="B", unit_scale=True, unit_divisor=1024,
                file=sys.stderr,
            )  # fmt: skip

    def update(self, count: int) -> None:
        self.done += count
        if self.bar is not None:
            self.bar.update(count)
            return
        now = time.monotonic()
        percent = self.done * 100 // self.total if self.total else None
        crossed = percent is not None and self.next_percent <= percent < 100
        if not crossed and now - self.last_line < LINE_INTERVAL_S:
            return
        self.last_line = now
        if percent is None:
            print(f"downloading {self.url}: {self.done / MIB:.1f} MiB", flush=True)
            return
        self.next_percent = (percent // LINE_PERCENT + 1) * LINE_PERCENT
        sizes = f"{self.done / MIB:.1f} of {self.total / MIB:.1f} MiB"
        print(f"downloading {self.url}: {percent}% ({sizes})", flush=True)

    def finish(self) -> None:
        """The last line (without a bar): the size and the time it took."""
        if self.bar is None:
            took = format_duration(time.monotonic() - self.start)
            print(f"downloaded {self.url}: {self.done / MIB:.1f} MiB in {took}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _copy(url: str, response: http.client.HTTPResponse, sink: BinaryIO, shown: _Progress) -> int:
    """Stream the body into ``sink``; the bytes received. A network failure is one line."""
    received = 0
    while True:
        try:
            block = response.read(BLOCK)
        except (OSError, http.client.HTTPException) as exc:  # reset, timeout, bad chunking
            msg = f"{url}: download failed after {received} bytes ({_reason(exc)})"
            raise DownloadError(msg) from None
        if not block:
            return received
        sink.write(block)  # a full disk raises here: atomic_path names the destination
        received += len(block)
        shown.update(len(block))


def check_zip(url: str, path: Path) -> None:
    """Refuse a downloaded file that is no zip or whose members fail their CRC check."""
    if not zipfile.is_zipfile(path):
        raise ConfigurationError(f"{url}: not a zip archive")
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, ValueError) as exc:
        raise ConfigurationError(f"{url}: not a readable zip archive ({exc})") from None
    if bad is not None:
        raise ConfigurationError(f"{url}: corrupt zip archive (member {bad!r} fails its CRC check)")


def download(url: str, destination: Path, *, progress: bool | None = None) -> Path:
    """Download the zip at ``url`` to ``destination`` (returned), complete and checked or not at
    all; ``progress``: a bar (True), lines (False) or a bar only in a terminal (None)."""
    check_url(url)
    destination = Path(destination)
    with _open(url) as response:
        expected = _content_length(response)
        shown = _Progress(url, expected, progress)
        try:
            with atomic_path(destination) as partial:
                with open(partial, "wb") as sink:
                    received = _copy(url, response, sink, shown)
                if expected is not None and received != expected:
                    msg = (
                        f"{url}: truncated download ({received} of the {expected} bytes the "
                        "server announced); nothing was kept"
                    )
                    raise DownloadError(msg)
                check_zip(url, partial)
        finally:
            shown.close()
    shown.finish()
    return destination


def _usable(path: Path) -> bool:
    """A cached zip is reused as it is: it reached its name only after ``check_zip`` passed, and
    an install checks every member's CRC again, so the whole file is not read a second time."""
    return path.is_file() and zipfile.is_zipfile(path)


def cached_download(url: str, cache: Path, *, progress: bool | None = None) -> Path:
    """The zip at ``url`` as ``cache/<sha256(url)[:16]>.zip``: downloaded when missing (or not a
    zip), else reused without a request. A process that finds another downloading the same URL
    waits for it (a lock: ``io.locks``) and then reuses its file."""
    check_url(url)
    key = url_sha256(url)
    target = cached_download_path(Path(cache), key)
    if _usable(target):
        return target
    with held(download_lock_path(Path(cache), key)):
        if _usable(target):  # downloaded by the process we waited for
            return target
        for partial in target.parent.glob(f".{target.name}.*"):  # a killed download's temporary
            if partial.is_file():  # (only this URL's writer, which we now are, makes them)
                remove_file(partial, inside=[target.parent])
        return download(url, target, progress=progress)
