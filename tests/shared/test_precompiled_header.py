"""torch's shared precompiled <torch/extension.h>, made and used through `precompiled_header`: real g++ builds
through torch's load_inline with the header damaged as killed or unlocked makers damage it."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import pytest

from oracleaudit import precompiled_header

_names = itertools.count()


def _can_build() -> bool:
    from torch.utils.cpp_extension import is_ninja_available

    return is_ninja_available() and shutil.which("g++") is not None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(not _can_build(), reason="needs ninja and g++ (load_inline)")]


@pytest.fixture
def header() -> Path:
    """The shared header, made (and vouched for) before the test; skips where it cannot be made here."""
    made = precompiled_header.usable(None, None)
    if not made:
        pytest.skip("this torch cannot precompile its header here (no use_pch, or its folder is read-only)")
    return precompiled_header._folder() / "extension.h.gch"


def _answer(tmp_path: Path, use_pch: bool = True, load_inline=None):
    from torch.utils import cpp_extension

    name = f"oa_header_answer_{os.getpid()}_{next(_names)}"
    directory = tmp_path / name
    directory.mkdir()
    return precompiled_header.load(load_inline or cpp_extension.load_inline, name=name,
                                   cpp_sources="int answer() { return 42; }", functions=["answer"],
                                   build_directory=str(directory), use_pch=use_pch)


def test_the_header_is_made_once_and_a_binding_unit_builds_and_loads_with_it(header: Path, tmp_path: Path) -> None:
    made = header.stat().st_mtime_ns
    assert precompiled_header.usable(None, None) is True
    assert header.stat().st_mtime_ns == made, "made again although the flags are the same"
    assert _answer(tmp_path).answer() == 42
    assert header.stat().st_mtime_ns == made, "the build made its own header instead of using the one made"


def test_a_header_half_written_by_a_killed_maker_is_made_again_before_a_build_takes_it(
        header: Path, tmp_path: Path) -> None:
    whole = header.stat().st_size
    with open(header, "r+b") as file:  # torch's signature file still names these flags: torch alone keeps it
        file.truncate(whole // 2)
    assert precompiled_header.usable(None, None) is True
    assert header.stat().st_size > whole * 0.9, "the half-written header was kept"
    assert _answer(tmp_path).answer() == 42


def test_a_build_that_crashes_the_compiler_on_a_damaged_header_makes_it_again_and_builds(
        header: Path, tmp_path: Path) -> None:
    # two makers writing the same file: size, inode and time as vouched for, the middle overwritten
    stat = header.stat()
    with open(header, "r+b") as file:
        file.seek(stat.st_size // 2)
        file.write(bytes(range(256)) * 4096)
    os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert precompiled_header.usable(None, None) is True, "not even the voucher can see this damage"
    assert header.stat().st_mtime_ns == stat.st_mtime_ns
    assert _answer(tmp_path).answer() == 42
    assert header.stat().st_mtime_ns != stat.st_mtime_ns, "the damaged header was not made again"


def test_a_build_that_fails_without_a_crash_on_a_damaged_header_makes_it_again_and_builds(
        header: Path, tmp_path: Path) -> None:
    """A damaged header does not always crash g++: the build here fails with ordinary errors (as one did after
    the damage above); the empty unit built to check the header fails too (crash or errors alike), so the
    header is made again and the build run once more."""
    from torch.utils import cpp_extension

    stat = header.stat()
    with open(header, "r+b") as file:
        file.seek(stat.st_size // 2)
        file.write(bytes(range(256)) * 4096)
    os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    calls = []

    def failing_once(**kwargs):
        calls.append(kwargs["name"])
        if len(calls) == 1:
            raise RuntimeError(f"Error building extension '{kwargs['name']}': main.cpp:3:1: error: macro "
                               "\"PYBIND11_CONCAT\" requires 27241 arguments, but only 2 given")
        return cpp_extension.load_inline(**kwargs)

    assert _answer(tmp_path, load_inline=failing_once).answer() == 42
    assert len(calls) == 2 and header.stat().st_mtime_ns != stat.st_mtime_ns, "the damaged header was kept"


def test_a_build_without_the_header_leaves_it_for_the_builds_that_use_it(header: Path, tmp_path: Path) -> None:
    made = header.stat().st_mtime_ns
    precompiled_header.guard()  # as the verify stage does before a solution's own load_inline runs
    assert _answer(tmp_path, use_pch=False).answer() == 42
    assert header.stat().st_mtime_ns == made, "torch's load_inline without use_pch deleted it"


def test_a_compiler_crash_on_a_whole_header_is_the_source_s_and_is_raised(header: Path, tmp_path: Path) -> None:
    made = header.stat().st_mtime_ns
    calls = []

    def crashing(**kwargs):
        calls.append(kwargs["name"])
        raise RuntimeError(f"Error building extension '{kwargs['name']}': g++-real: internal compiler error: "
                           "Segmentation fault signal terminated program cc1plus")

    with pytest.raises(RuntimeError, match="internal compiler error"):
        _answer(tmp_path, load_inline=crashing)
    assert len(calls) == 1, "built again although the header is whole"
    assert header.stat().st_mtime_ns == made, "a whole header was made again"


def test_a_source_that_does_not_compile_with_a_whole_header_is_raised_and_the_header_kept(
        header: Path, tmp_path: Path) -> None:
    from torch.utils import cpp_extension

    made = header.stat().st_mtime_ns
    with pytest.raises(RuntimeError, match="Error building extension"):
        precompiled_header.load(cpp_extension.load_inline, name=f"oa_header_wrong_{os.getpid()}",
                                cpp_sources="int answer() { return undeclared_name; }", functions=["answer"],
                                build_directory=str(tmp_path), use_pch=True)
    assert header.stat().st_mtime_ns == made, "a whole header was made again"
