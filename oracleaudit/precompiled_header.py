"""torch's precompiled <torch/extension.h>: one file beside torch's headers, shared by every build on the
machine, made and used here so that no build ever takes a damaged one.

torch's `load_inline` keeps one precompiled header (`extension.h.gch`, with the command that made it in
`extension.h.sign`). Called with `use_pch=True` it makes the header where it is missing or was made with other
flags; called without, it deletes it; neither holds a lock. So a build that deletes the header while others
run (the verify stage runs a solution's own `load_inline`, which does) lets two processes make it at once,
both writing the same 0.8 GB file, after which torch writes the signature and every later build on the
machine takes the interleaved file. On the H200 machine, after a GPU test run with the verify test beside
the run stage's tests (2026-12-02), g++ crashed on every binding unit of the next two calls ("internal
compiler error: Segmentation fault"; general protection faults of cc1plus in the kernel log); overwriting
part of a header here reproduces that crash. Two makers at once is the sequence torch's code allows and the
one that fits; it was not observed directly.

`guard()` replaces both of torch's functions in the calling process:
- the header is made only under an flock beside it, and only a header this module saw made to the end is
  kept: its inode, size and modification time are recorded after torch's maker returns (the voucher), and
  a header that does not match (half-written by a maker that was killed, or written by a process outside
  the lock) is deleted and made again;
- a build that does not use the header leaves it for the builds that do (g++ takes a precompiled header
  only where it was made with the same options, and parses the header otherwise).

`load()` runs `load_inline`; when a build fails while a header is there, and it is the one the build found,
an empty unit is built with it: where that fails too, the header is deleted and the build is run once more
(the header then made afresh); otherwise the failure is the source's and is raised. A damaged header does
not always crash g++: with the same bytes of it overwritten, a build here failed with errors instead (macro
PYBIND11_CONCAT "requires 27241 arguments"), and so did the next build, `use_pch` or not (g++ takes
`extension.h.gch` for any unit that includes <torch/extension.h> with the options it was made with). So any
failure is checked, not only a crash; a failing unit costs one empty build more.

No tree-sitter or libclang here; torch is imported only when a build asks for it.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from oracleaudit.cache import held
from oracleaudit.files import write_atomic

__all__ = ["discard", "guard", "load", "usable"]

LOCK = "oracleaudit-precompiled-header.lock"
VOUCHER = "oracleaudit-precompiled-header.made"
COMPILER_CRASH = re.compile(r"internal compiler error")  # build_isolating raises such a failure as it is
_MAKE = "_check_and_build_extension_h_precompiler_headers"
_REMOVE = "remove_extension_h_precompiler_headers"
_probes = itertools.count()


def _folder() -> Path:
    from torch.utils import cpp_extension

    torch_path = getattr(cpp_extension, "_TORCH_PATH", Path(cpp_extension.__file__).parents[1])
    return Path(torch_path) / "include" / "torch"


def _fingerprint(path: Path) -> str | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return f"{stat.st_ino} {stat.st_size} {stat.st_mtime_ns}"


def _vouched(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _delete(folder: Path) -> None:
    for name in ("extension.h.gch", "extension.h.sign", VOUCHER):
        (folder / name).unlink(missing_ok=True)


def _guarded_make(make: Callable[..., None]) -> Callable[..., None]:
    def made(*args: Any, **kwargs: Any) -> None:
        folder = _folder()
        header, voucher = folder / "extension.h.gch", folder / VOUCHER
        with held(folder / LOCK):
            if header.exists() and _vouched(voucher) != _fingerprint(header):
                _delete(folder)
            make(*args, **kwargs)
            made_now = _fingerprint(header)
            if made_now is not None and made_now != _vouched(voucher):
                write_atomic(voucher, made_now)

    made.oracleaudit_guarded = True  # type: ignore[attr-defined]
    return made


def _left_alone() -> None:
    """A build without the header leaves it (torch's own function deletes it)."""


def guard() -> None:
    """Replace torch's maker and remover of the shared header in this process (once; see the module)."""
    from torch.utils import cpp_extension

    make = getattr(cpp_extension, _MAKE, None)
    if make is not None and not getattr(make, "oracleaudit_guarded", False):
        setattr(cpp_extension, _MAKE, _guarded_make(make))
    if hasattr(cpp_extension, _REMOVE):
        setattr(cpp_extension, _REMOVE, _left_alone)


def usable(extra_cflags: Sequence[str] | None, extra_include_paths: Sequence[str] | None) -> bool | None:
    """Whether a binding unit built with these host flags can include the precompiled header (made here if
    needed: about a minute, once per machine and set of flags; the others wait on the lock); None where this
    torch's `load_inline` has no `use_pch`.

    The binding unit (declarations and pybind11 definitions) spends most of its time parsing
    <torch/extension.h>: with it precompiled, the units of the largest bundled solutions compiled 2.3×
    faster (about 11 s instead of 28; bench/binding_pch.py). Every solution of the bundled dataset passes the
    same (no) host flags, so one header serves all of them."""
    import inspect

    from torch.utils import cpp_extension

    if "use_pch" not in inspect.signature(cpp_extension.load_inline).parameters:
        return None
    guard()  # also where the header cannot be made here: torch would try to delete one made by others
    if not hasattr(cpp_extension, _MAKE) or not os.access(_folder(), os.W_OK):
        return False
    try:
        getattr(cpp_extension, _MAKE)(list(extra_cflags or []), list(extra_include_paths or []))
    except Exception:  # no g++, or the header does not precompile: units parse it as written
        return False
    return True


def discard() -> None:
    """Delete the shared header (under its lock): the next build that uses it makes it again."""
    folder = _folder()
    with held(folder / LOCK):
        _delete(folder)


def load(load_inline: Callable[..., Any], **kwargs: Any) -> Any:
    """`load_inline(**kwargs)`, run once more where it failed on a damaged shared header (the header then
    deleted, so that the second build makes it afresh or parses <torch/extension.h>). g++ takes the header
    wherever it was made with the build's options, `use_pch` or not."""
    header = _folder() / "extension.h.gch"
    found = _fingerprint(header)
    try:
        return load_inline(**kwargs)
    except (RuntimeError, UnicodeDecodeError):
        if found is None or (_fingerprint(header) == found and not _discard_if_damaged(header)):
            raise
    _forget(kwargs["name"])
    return load_inline(**kwargs)


def _forget(name: str) -> None:
    """Make this process's next load_inline of `name` build again: torch records an extension's sources when
    it starts building them and, asked for the same sources again, only imports the module."""
    from torch.utils import cpp_extension

    entries = getattr(getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None), "entries", None)
    if isinstance(entries, dict):
        entries.pop(name, None)


def _discard_if_damaged(header: Path) -> bool:
    """Build an empty unit with the shared header; where that fails (a compiler crash, output that is not text
    on which torch's formatting fails, or errors in what the header declares), delete the header (if no other
    process has made it again meanwhile) and say so."""
    from torch.utils import cpp_extension

    probed = _fingerprint(header)
    name = f"oa_header_probe_{os.getpid()}_{next(_probes)}"
    with tempfile.TemporaryDirectory(prefix="oracleaudit-header-probe-") as directory:
        try:
            cpp_extension.load_inline(name=name, cpp_sources="int oa_header_probe() { return 1; }",
                                      functions=["oa_header_probe"], build_directory=directory, use_pch=True)
            return False
        except (RuntimeError, UnicodeDecodeError):
            pass
    folder = header.parent
    with held(folder / LOCK):
        if _fingerprint(header) == probed:
            _delete(folder)
    return True
