"""Files written whole: under a temporary name in the target's folder, then renamed into place, so a reader
never sees half a file and a crash leaves the previous one. Written files get the permissions the umask
gives a new file (a temporary file alone would be 0600, unreadable for others on shared storage)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable


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
