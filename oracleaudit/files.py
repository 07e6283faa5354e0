"""Files written whole: under a temporary name in the target's folder, then renamed into place, so a reader
never sees half a file and a crash leaves the previous one. Written files get the permissions the umask
gives a new file (a temporary file alone would be 0600, unreadable for others on shared storage). And files
that may ship gzipped: NAME or, where only that is there, NAME.gz holding the same bytes, read either way."""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

from oracleaudit.errors import OracleAuditError


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_with(path: Path, write: Callable[[Path], None], sync: bool = False) -> None:
    """Create `path` by calling `write(temporary path)`, then renaming the result into place (fsync'd first
    when `sync`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, _umask_mode())
        if sync:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str, sync: bool = False) -> None:
    """Write a text file (UTF-8) whole: see the module docstring."""
    write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), sync)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, as hex (read in blocks: any size)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def plain_or_gzipped(folder: Path, name: str) -> Path:
    """folder/name, or folder/name.gz where only that is there."""
    plain, gzipped = Path(folder) / name, Path(folder) / (name + ".gz")
    return gzipped if gzipped.is_file() and not plain.exists() else plain


def plain_bytes(path: Path, what: str = "gzip file") -> bytes:
    """A file's bytes, gunzipped when its name ends in .gz (one that is no gzip: an error naming the file and
    saying it is not a `what`)."""
    path = Path(path)
    if path.suffix != ".gz":
        return path.read_bytes()
    try:
        return gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as err:
        raise OracleAuditError(f"{path}: not a {what} ({err})") from None


def _nearest_existing(path: Path) -> Path:
    """`path` itself or its closest ancestor that exists (the folder a new output would be made in)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_creatable(path: Path, option: str) -> None:
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise OracleAuditError(f"{option} {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise OracleAuditError(f"{option} {path}: cannot write in {base} (permission denied)")


def check_output_dir(path: Path, option: str = "--out") -> None:
    """Refuse, before any work, an output folder that cannot be written: an existing file, or a folder (or
    the closest existing ancestor of a new one) without write permission. Creates nothing."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise OracleAuditError(f"{option} {path}: is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise OracleAuditError(f"{option} {path}: cannot write in this folder (permission denied)")
        return
    _check_creatable(path, option)


def check_output_file(path: Path, option: str = "--out") -> None:
    """Refuse, before any work, an output file that cannot be written (a folder, or an unwritable place)."""
    path = Path(path)
    if path.is_dir():
        raise OracleAuditError(f"{option} {path}: is a folder, not a file")
    if path.exists() and not os.access(path, os.W_OK):
        raise OracleAuditError(f"{option} {path}: cannot write this file (permission denied)")
    _check_creatable(path, option)
