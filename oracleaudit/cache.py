"""The cache folder: `$ORACLEAUDIT_CACHE`, default `~/.cache/oracleaudit`. Everything in it is keyed by a
hash of its inputs, so it can be shared by runs, deleted at any time, and never changes a result.

    compile/   nvcc compile-check results of the mutate stage (mutation/compiler.py)
    builds/    the run stage's extensions, one folder per extension named by a hash of its sources (execution/build.py)
    references/ the fp32 and fp64 reference outputs per problem and input (execution/references.py)
    kernels/   the fused evidence kernels' library, by a hash of its source, nvcc and flags (execution/evidence_kernels.py)
    casts/     whether a problem's reference raises with its inputs cast to a dtype (scoring/casting.py)
"""

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator


def cache_root() -> Path:
    return Path(os.environ.get("ORACLEAUDIT_CACHE") or Path("~/.cache/oracleaudit").expanduser())


@contextlib.contextmanager
def held(lock_file: Path) -> Iterator[None]:
    """An exclusive flock on `lock_file` (created, with its folder, if missing) for the block, against every
    other process on this machine; the kernel releases it when its holder dies."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
