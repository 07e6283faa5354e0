"""Developer check: compile the CUDA of many solution files in ONE nvcc front-end pass.

Each solution's cuda_sources string is wrapped in its own namespace (includes hoisted, macros
undefined afterwards) so the torch headers are parsed once. Run: python tools/check_solutions.py FILE...
Exit status 0 when every solution type-checks (host and device code) for sm_90.
"""
import ast
import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import torch.utils.cpp_extension as cpp_ext


def cuda_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    consts = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    consts[t.id] = node.value.value
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "load_inline":
            for kw in node.keywords:
                if kw.arg == "cuda_sources":
                    vals = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) else [kw.value]
                    for v in vals:
                        if isinstance(v, ast.Name):
                            out.append(consts[v.id])
                        elif isinstance(v, ast.Constant):
                            out.append(v.value)
    if not out:
        raise SystemExit(f"{path}: no load_inline cuda_sources found")
    return out


def main(files: list[str]) -> int:
    includes: list[str] = []
    body: list[str] = []
    spans = []
    for i, f in enumerate(files):
        start = None
        for src in cuda_strings(Path(f)):
            lines = []
            for line in src.splitlines():
                if line.strip().startswith("#include"):
                    if line.strip() not in includes:
                        includes.append(line.strip())
                    lines.append("")
                else:
                    lines.append(line)
            macros = re.findall(r"^\s*#\s*define\s+(\w+)", src, re.M)
            body.append(f"namespace oa_check_{i} {{")
            start = len(body)
            body.extend(lines)
            spans.append((start, len(body), f))
            body.append("}")
            body.extend(f"#undef {m}" for m in macros)
    text = "\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *includes, *body]) + "\n"
    offset = 3 + len(includes)
    with tempfile.TemporaryDirectory() as tmp:
        cu = Path(tmp) / "check.cu"
        cu.write_text(text)
        inc = [f"-I{p}" for p in cpp_ext.include_paths()] + ["-I" + sysconfig.get_paths()["include"]]
        cmd = ["nvcc", "-std=c++20", "-arch=sm_90", "-cuda", *inc, str(cu), "-o", str(Path(tmp) / "check.ii")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    bad = set()
    for m in re.finditer(r"check\.cu\((\d+)\): error: (.*)", proc.stdout + proc.stderr):
        line = int(m.group(1)) - offset
        for s, e, f in spans:
            if s < line <= e:
                print(f"{f}:{line - s}: error: {m.group(2)}")
                bad.add(f)
    if proc.returncode != 0 and not bad:
        print((proc.stdout + proc.stderr)[-4000:])
        return 1
    print(f"{len(files) - len(bad)} of {len(files)} solutions compile")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
