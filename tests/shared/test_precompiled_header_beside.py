"""`precompiled_header.make`, which makes the shared header beside the builds that do not wait for it: torch's maker
redirected into a temporary file renamed into place (whatever form of command torch passes to
`subprocess.check_output`), and the maker it cannot redirect left to the builds that wait, as before. A stand-in
maker writes a small file instead of g++'s header, in a folder of the test's."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from oracleaudit import precompiled_header

CODE = "import os, sys; open(sys.argv[2], 'w').write('made'); print(os.path.basename(sys.argv[2]))"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch) -> Path:
    from torch.utils import cpp_extension

    monkeypatch.setattr(precompiled_header, "_folder", lambda: tmp_path)
    monkeypatch.setattr(cpp_extension, precompiled_header._MAKE, None, raising=False)  # restored after the test
    monkeypatch.setattr(cpp_extension, precompiled_header._REMOVE, lambda: None, raising=False)
    return tmp_path


@pytest.mark.parametrize("form", ["list", "shell"])
def test_the_header_is_written_to_a_temporary_file_and_renamed_into_place(folder: Path, monkeypatch,
                                                                           form: str) -> None:
    from torch.utils import cpp_extension

    seen = []

    def maker(extra_cflags, extra_include_paths):  # as torch's: the header's path after -o
        target = folder / "extension.h.gch"
        if form == "list":
            seen.append(subprocess.check_output([sys.executable, "-c", CODE, "-o", str(target)], text=True))
        else:
            seen.append(subprocess.check_output(f"{sys.executable} -c {shlex.quote(CODE)} -o {target}", shell=True,
                                                text=True))

    monkeypatch.setattr(cpp_extension, precompiled_header._MAKE, maker)
    assert precompiled_header._made_beside()
    precompiled_header.make(None, None)
    assert (folder / "extension.h.gch").read_text() == "made"
    assert seen[0].strip().startswith(".extension.h.gch."), "the maker wrote the header in place"
    assert not list(folder.glob(".extension.h.gch.*"))
    assert precompiled_header._ready(folder, precompiled_header._flags_text(None, None))
    assert not precompiled_header._ready(folder, precompiled_header._flags_text(["-DOTHER"], None))
    assert subprocess.check_output is not None and "into_place" not in repr(subprocess.check_output)


def test_a_failed_make_is_remembered_and_not_started_again(folder: Path, monkeypatch) -> None:
    from torch.utils import cpp_extension

    def maker(extra_cflags, extra_include_paths):
        subprocess.check_output([sys.executable, "-c", "raise SystemExit(1)", "-o", str(folder / "extension.h.gch")])

    monkeypatch.setattr(cpp_extension, precompiled_header._MAKE, maker)
    with pytest.raises(subprocess.CalledProcessError):
        precompiled_header.make(None, None)
    assert not (folder / "extension.h.gch").exists() and not list(folder.glob(".extension.h.gch.*"))
    assert (folder / precompiled_header.FAILED).read_text() == precompiled_header._flags_text(None, None)
    started = []
    monkeypatch.setattr(subprocess, "Popen", lambda *args, **kwargs: started.append(args))
    monkeypatch.setattr(precompiled_header, "_started", set())
    precompiled_header._make_in_background(None, None)
    assert started == []
    precompiled_header._make_in_background(["-DOTHER"], None)  # other flags: tried
    assert len(started) == 1


def test_a_maker_that_does_not_go_through_check_output_is_waited_for(folder: Path, monkeypatch) -> None:
    from torch.utils import cpp_extension

    def maker(extra_cflags, extra_include_paths):
        os.system("true")

    monkeypatch.setattr(cpp_extension, precompiled_header._MAKE, maker)
    assert not precompiled_header._made_beside()
