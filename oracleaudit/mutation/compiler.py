"""Batched nvcc compile checks: many namespace clones per translation unit, errors attributed to clones,
results cached by a content hash of everything that produced them.

Device batches (`nvcc -cubin -arch=sm_90`) hold the device-only views of an original and its device
mutants; they need no torch headers and take about a second. Host batches (`nvcc -cuda` with the torch
headers) hold whole sources, for mutants of host code; the headers make them slow (~1 min on 2 cores),
so all host clones of a run share as few translation units as possible.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from oracleaudit.cache import cache_root
from oracleaudit.errors import OracleAuditError
from oracleaudit.mutation.tce import EMPTY_SIGNATURE, clone_signatures

ARCH = "sm_90"
DEVICE = "device"
HOST = "host"
_LINE_REF = re.compile(r"(?:batch\.cu\((\d+)\)|line (\d+) of \"?[^\s\"]*batch\.cu|batch\.cu:(\d+):)")
_ERROR_START = re.compile(r"(batch\.cu\(\d+\): (?:catastrophic )?error|batch\.cu:\d+:\d+: error|: error:|ptxas (?:error|fatal)|"
                          r"error\s*:|\(\d+\): error)")
_NAMESPACE = re.compile(r"oa_[mh](\d+)_")


@dataclass(frozen=True)
class Clone:
    """One variant of a source to compile inside its own namespace: `body` is its clone view with the edit
    applied; `macros` are #undef'd before it so clones with different macro values do not clash."""

    key: str
    body: bytes
    macros: tuple[str, ...]
    includes: tuple[str, ...]


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    error: str = ""
    signature: str | None = None


def cache_dir() -> Path:
    return cache_root() / "compile"


class Toolchain:
    """nvcc, its version and the flags oracleaudit uses; compiles one batch translation unit."""

    def __init__(self, nvcc: str | None = None):
        self.nvcc = nvcc or shutil.which("nvcc")
        if self.nvcc is None:
            raise OracleAuditError("nvcc not found on PATH (needed for compile checks; use --no-compile to skip)")

    @cached_property
    def version(self) -> str:
        out = subprocess.run([self.nvcc, "--version"], capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1] if out.strip() else "unknown"

    @cached_property
    def host_flags(self) -> list[str]:
        import sysconfig

        import torch
        from torch.utils import cpp_extension

        std = "-std=c++20" if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 10) else "-std=c++17"
        includes = [f"-I{p}" for p in cpp_extension.include_paths()] + ["-I" + sysconfig.get_paths()["include"]]
        return [std, "-DTORCH_EXTENSION_NAME=oracleaudit_check", "-DTORCH_API_INCLUDE_EXTENSION_H", *includes]

    @cached_property
    def torch_flags(self) -> list[str]:
        """The flags torch's `load_inline` gives nvcc (no implicit half/bfloat16 conversions, relaxed
        constexpr): a mutant that compiles only without them would fail to build in the run stage."""
        from torch.utils import cpp_extension

        return list(cpp_extension.COMMON_NVCC_FLAGS)

    def flags(self, mode: str) -> list[str]:
        if mode == DEVICE:
            return ["-cubin", f"-arch={ARCH}", "-O3", "-std=c++17", "-w", *self.torch_flags]
        return ["-cuda", f"-arch={ARCH}", "-w", *self.torch_flags, *self.host_flags]

    def compile(self, text: str, mode: str) -> tuple[int, str, dict[int, str]]:
        """Compile a batch; return (exit code, diagnostics, clone signatures). Cached by content hash."""
        flags = self.flags(mode)
        key = hashlib.sha256("\0".join([self.version, *flags, text]).encode()).hexdigest()
        cached = cache_dir() / key[:2] / f"{key}.json"
        if cached.is_file():
            try:
                data = json.loads(cached.read_text())
                return data["rc"], data["output"], {int(k): v for k, v in data["signatures"].items()}
            except (json.JSONDecodeError, KeyError, ValueError):
                cached.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(prefix="oracleaudit-nvcc-") as tmp:
            source = Path(tmp) / "batch.cu"
            source.write_text(text)
            output = Path(tmp) / ("batch.cubin" if mode == DEVICE else "batch.ii")
            try:
                proc = subprocess.run([self.nvcc, *flags, "batch.cu", "-o", output.name], cwd=tmp,
                                      capture_output=True, text=True, timeout=1800)
                rc, diagnostics = proc.returncode, proc.stdout + proc.stderr
            except subprocess.TimeoutExpired:
                rc, diagnostics = -1, "batch.cu: error: nvcc timed out after 1800 s"
            signatures = clone_signatures(output.read_bytes()) if rc == 0 and mode == DEVICE else {}
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp_file = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp_file.write_text(json.dumps({"rc": rc, "output": diagnostics, "signatures": signatures}))
        os.replace(tmp_file, cached)
        return rc, diagnostics, signatures


def assemble(clones: list[Clone], mode: str) -> tuple[str, list[tuple[int, int]]]:
    """One translation unit holding every clone in namespace oa_m<i>_ (device) or oa_h<i>_ (host).
    Returns the text and each clone's 1-based (first, last) line range."""
    letter = "m" if mode == DEVICE else "h"
    # Device batches blank the torch headers, which in a real load_inline build bring in these under nvcc.
    head = ["// oracleaudit compile-check batch", "#include <cuda_runtime.h>", "#include <cuda_fp16.h>",
            "#include <cuda_bf16.h>", "#include <cfloat>", "#include <climits>", "#include <cmath>",
            "#include <cstdint>"]
    if mode == HOST:
        head += ["#include <torch/types.h>", "#include <cuda.h>"]
    for clone in clones:
        for line in clone.includes:
            if line not in head:
                head.append(line)
    lines = list(head)
    ranges = []
    for i, clone in enumerate(clones):
        lines.extend(f"#undef {m}" for m in clone.macros)
        lines.append(f"namespace oa_{letter}{i}_ {{")
        first = len(lines) + 1
        lines.extend(clone.body.decode().split("\n"))
        ranges.append((first, len(lines)))
        lines.append(f"}}  // namespace oa_{letter}{i}_")
    for clone in clones[-1:]:
        lines.extend(f"#undef {m}" for m in clone.macros)
    return "\n".join(lines) + "\n", ranges


def attribute(diagnostics: str, ranges: list[tuple[int, int]]) -> tuple[dict[int, str], list[str]]:
    """Split nvcc's diagnostics into error blocks and map each to the clone it concerns (by line in the
    batch file, or by the clone namespace in a mangled name). Returns ({clone: first message}, unattributed)."""
    blocks: list[list[str]] = []
    for line in diagnostics.splitlines():
        if _ERROR_START.search(line) and "warning" not in line.split("error")[0]:
            blocks.append([line])
        elif blocks and (line.startswith(" ") or "detected during" in line or "instantiation" in line):
            blocks[-1].append(line)
    failed: dict[int, str] = {}
    unattributed: list[str] = []
    for block in blocks:
        text = "\n".join(block)
        clone = None
        for match in _LINE_REF.finditer(text):
            line = int(next(g for g in match.groups() if g))
            clone = next((i for i, (a, b) in enumerate(ranges) if a <= line <= b), None)
            if clone is not None:
                break
        if clone is None:
            named = _NAMESPACE.search(text)
            clone = int(named.group(1)) if named and int(named.group(1)) < len(ranges) else None
        message = _clean(block[0])
        if clone is None:
            unattributed.append(message)
        else:
            failed.setdefault(clone, message)
    return failed, unattributed


def _clean(line: str) -> str:
    line = re.sub(r"^.*?batch\.cu\(\d+\): ", "", line)
    line = re.sub(r"^.*?batch\.cu:\d+:\d+: ", "", line)
    return _NAMESPACE.sub("", line).strip()[:300]


def settle(toolchain: Toolchain, clones: list[Clone], mode: str) -> dict[str, CompileResult]:
    """Compile a batch until every clone has an outcome: failing clones are removed and the rest
    recompiled; errors that name no clone are resolved by bisection."""
    results: dict[str, CompileResult] = {}
    pending = list(clones)
    while pending:
        text, ranges = assemble(pending, mode)
        rc, diagnostics, signatures = toolchain.compile(text, mode)
        if rc == 0:
            for i, clone in enumerate(pending):
                results[clone.key] = CompileResult(True, "", signatures.get(i, EMPTY_SIGNATURE) if mode == DEVICE else None)
            return results
        failed, unattributed = attribute(diagnostics, ranges)
        if failed:
            for i, message in failed.items():
                results[pending[i].key] = CompileResult(False, message)
            pending = [c for i, c in enumerate(pending) if i not in failed]
            continue
        if len(pending) == 1:
            message = unattributed[0] if unattributed else _first_line(diagnostics)
            results[pending[0].key] = CompileResult(False, message)
            return results
        half = len(pending) // 2
        results.update(settle(toolchain, pending[:half], mode))
        results.update(settle(toolchain, pending[half:], mode))
        return results
    return results


def _first_line(diagnostics: str) -> str:
    for line in diagnostics.splitlines():
        if "error" in line:
            return _clean(line)
    return (diagnostics.strip().splitlines() or ["nvcc failed without a message"])[0][:300]


def default_jobs() -> int:
    return max(1, min(os.cpu_count() or 1, 32))
