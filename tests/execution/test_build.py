"""The compile-once build of the run stage: one extension per CUDA unit with every variant in a namespace,
and the load_inline interception that hands ModelNew the selected variant."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from oracleaudit.errors import OracleAuditError
from oracleaudit.execution import build
from oracleaudit.mutation import find_mutants
from oracleaudit.mutation.catalog import load_catalog, select_rules
from oracleaudit.mutation.compiler import Toolchain
from oracleaudit.problem import bundled_root

SOFTMAX = bundled_root() / "solutions" / "level1" / "23_Softmax.py"


def softmax_mutants(count: int):
    rules = select_rules(load_catalog(), ["arithmetic", "synchronization"], None)
    units, *_ = find_mutants([SOFTMAX], rules)
    return [m for u in units for m in u.mutants][:count]


def test_the_plan_puts_the_original_and_every_mutant_in_its_own_namespace() -> None:
    mutants = softmax_mutants(3)
    plan = build.plan_build(SOFTMAX, mutants)
    assert [v.key for v in plan.variants] == ["original", *(m.id for m in mutants)]
    (extension,) = plan.extensions
    for index in range(4):
        assert f"namespace oa_v{index}_ {{" in extension.cuda_source
        assert f'm.def("softmax_forward__v{index}", &oa_v{index}_::softmax_forward);' in extension.cpp_source
    assert extension.light and extension.cuda_source.count(build.LIGHT_HEADER) == 1
    assert "torch/extension.h" not in extension.cuda_source
    assert extension.cuda_source.count("#undef BLOCK_SIZE") == 5
    (full,) = build.plan_build(SOFTMAX, mutants, full_headers=frozenset({0})).extensions
    assert not full.light and full.cuda_source.count("#include <torch/extension.h>") == 1
    assert full.name != extension.name  # named by content: the two never share a build folder


def test_a_unit_that_fails_with_the_light_header_is_marked_and_built_with_its_own(tmp_path, monkeypatch) -> None:
    """The first build fails in the original's namespace (as a unit needing torch::nn would): the unit is
    marked in the build folder and built again with torch/extension.h; later builds go there directly."""
    built = []

    def fake_build(plan, build_dir, *args, **kwargs):
        (extension,) = plan.extensions
        built.append(extension.light)
        if extension.light:
            (build_dir / extension.name).mkdir(parents=True, exist_ok=True)
            (build_dir / extension.name / "cuda.cu").write_text(extension.cuda_source)
            line = extension.cuda_source.splitlines().index("namespace oa_v0_ {") + 3
            raise RuntimeError(f"Error building extension '{extension.name}': cuda.cu({line}): error: "
                               'namespace "torch" has no member "nn"')
        return {extension.name: object()}

    monkeypatch.setattr(build, "build", fake_build)
    mutants = softmax_mutants(2)
    plan, _, dropped = build.build_isolating(SOFTMAX, mutants, tmp_path)
    assert built == [True, False] and dropped == {} and not plan.extensions[0].light
    assert build.full_header_units(SOFTMAX, tmp_path) == frozenset({0})
    marker = next((tmp_path / build.FULL_HEADERS_DIR).iterdir()).read_text()
    assert "does not build with #include <torch/types.h>" in marker and 'no member "nn"' in marker
    build.build_isolating(SOFTMAX, mutants, tmp_path)
    assert built == [True, False, False]


def test_a_compiler_crash_is_raised_and_marks_nothing(tmp_path, monkeypatch) -> None:
    """g++ crashing on the light unit says nothing about its headers: no marker, no second build, raised."""
    built = []

    def crashing_build(plan, build_dir, *args, **kwargs):
        (extension,) = plan.extensions
        built.append(extension.light)
        raise RuntimeError(f"Error building extension '{extension.name}': /usr/include/c++/13/bits/char_traits.h:"
                           "220:11: internal compiler error: Segmentation fault")

    monkeypatch.setattr(build, "build", crashing_build)
    with pytest.raises(RuntimeError, match="internal compiler error"):
        build.build_isolating(SOFTMAX, softmax_mutants(2), tmp_path)
    assert built == [True] and build.full_header_units(SOFTMAX, tmp_path) == frozenset()


def test_each_namespace_holds_its_mutant_s_edit_and_only_that_edit() -> None:
    mutants = softmax_mutants(2)
    plan = build.plan_build(SOFTMAX, mutants)
    source = plan.extensions[0].cuda_source
    bodies = [source.split(f"namespace oa_v{i}_ {{")[1].split(f"}}  // namespace oa_v{i}_")[0] for i in range(3)]
    original = bodies[0]
    for mutant, body in zip(mutants, bodies[1:]):
        unit = build.load_units(SOFTMAX)[0]
        expected = unit.edited(mutant.start, mutant.end, mutant.replacement)
        assert body.strip("\n") == build._INCLUDE.sub("", expected).strip("\n")
        assert body != original


def test_more_variants_than_one_extension_holds_are_split_into_chunks_that_each_carry_the_original() -> None:
    mutants = softmax_mutants(7)
    plan = build.plan_build(SOFTMAX, mutants, max_variants=3)
    assert [len(e.variants) for e in plan.extensions] == [3, 4, 3]
    assert all(e.variants[0].key == "original" for e in plan.extensions)
    covered = [v.key for e in plan.extensions for v in e.variants if v.key != "original"]
    assert covered == [m.id for m in mutants]


def test_chunks_are_of_equal_size_and_each_can_be_built_alone_by_its_name(tmp_path: Path) -> None:
    mutants = softmax_mutants(8)  # nine variants at most four to a chunk: three of three, not 4 + 4 + 1
    plan = build.plan_build(SOFTMAX, mutants, max_variants=4)
    assert [len(e.variants) for e in plan.extensions] == [3, 4, 4]
    listed = build.extensions_of(SOFTMAX, mutants, tmp_path)  # as build_isolating plans them (default size)
    assert listed == [(e.name, len(e.variants)) for e in build.plan_build(SOFTMAX, mutants).extensions]
    with pytest.raises(OracleAuditError, match="no extension oa_missing"):
        build.build_extension(SOFTMAX, mutants, tmp_path, "oa_missing")


def test_a_mutant_of_a_changed_file_is_refused(tmp_path: Path) -> None:
    mutants = softmax_mutants(1)
    copy = tmp_path / SOFTMAX.name
    copy.write_text(SOFTMAX.read_text() + "\n# changed\n")
    with pytest.raises(build.OracleAuditError, match="file changed since mutant"):
        build.plan_build(copy, mutants)


def test_importing_the_solution_for_a_variant_gives_model_new_that_variant_s_functions() -> None:
    mutants = softmax_mutants(2)
    plan = build.plan_build(SOFTMAX, mutants)
    (extension,) = plan.extensions
    built = types.SimpleNamespace(__name__=extension.name)
    for index in range(3):
        setattr(built, f"softmax_forward__v{index}", lambda x, index=index: ("variant", index, x))
    for variant in plan.variants:
        module = build.load_variant(plan, {extension.name: built}, variant)
        assert module.ModelNew()("input") == ("variant", variant.index, "input")


@pytest.mark.nvcc
@pytest.mark.slow
def test_the_combined_sources_compile_with_nvcc_and_the_torch_headers(tmp_path: Path) -> None:
    plan = build.plan_build(SOFTMAX, softmax_mutants(4))
    (extension,) = plan.extensions
    toolchain = Toolchain()
    cu = tmp_path / "variants.cu"
    cu.write_text("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + extension.cuda_source)
    cpp = tmp_path / "bindings.cpp"
    cpp.write_text("#include <torch/extension.h>\n" + extension.cpp_source)
    device = subprocess.run([toolchain.nvcc, *toolchain.flags("host"), str(cu), "-o", str(tmp_path / "v.ii")],
                            capture_output=True, text=True)
    assert device.returncode == 0, device.stderr[-2000:]
    gxx = shutil.which("g++")
    if gxx:
        flags = [f for f in toolchain.host_flags if f.startswith(("-I", "-D", "-std"))]
        host = subprocess.run([gxx, "-fsyntax-only", *flags, str(cpp)], capture_output=True, text=True)
        assert host.returncode == 0, host.stderr[-2000:]


def _load_answer(directory: Path):
    from torch.utils.cpp_extension import load_inline

    with build.exclusive_build_directory(directory):
        return load_inline(name="oa_lock_answer", cpp_sources="int answer() { return 42; }", functions=["answer"],
                           build_directory=str(directory))


def _can_build_cpp_extensions() -> bool:
    from torch.utils.cpp_extension import is_ninja_available

    return is_ninja_available() and shutil.which("g++") is not None


@pytest.mark.skipif(not _can_build_cpp_extensions(), reason="needs ninja and g++ (torch's load_inline)")
@pytest.mark.slow
def test_a_build_killed_midway_does_not_leave_its_directory_locked_for_the_next_build(tmp_path: Path) -> None:
    directory = tmp_path / "extension"
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).parents[2])!r}); "
              f"from pathlib import Path; from tests.execution.test_build import _load_answer; "
              f"_load_answer(Path({str(directory)!r}))")
    child = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "MAX_JOBS": "1"})
    deadline = time.monotonic() + 120
    while not (directory / build.TORCH_LOCK).exists() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)  # mid-build: torch's lock file stays behind
    child.wait()
    assert (directory / build.TORCH_LOCK).exists(), "the build finished before it could be killed"
    loaded = []
    builder = threading.Thread(target=lambda: loaded.append(_load_answer(directory)), daemon=True)
    builder.start()
    builder.join(180)
    assert not builder.is_alive(), "the next build waited on the killed build's lock"
    assert loaded[0].answer() == 42
