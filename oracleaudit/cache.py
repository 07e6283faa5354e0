"""The cache folder: `$ORACLEAUDIT_CACHE`, default `~/.cache/oracleaudit`. Everything in it is keyed by a
hash of its inputs, so it can be shared by runs, deleted at any time, and never changes a result.

    compile/   nvcc compile-check results of the mutate stage (compiler.py)
    builds/    the run stage's extensions, one folder per extension named by a hash of its sources (build.py)
"""

import os
from pathlib import Path


def cache_root() -> Path:
    return Path(os.environ.get("ORACLEAUDIT_CACHE") or Path("~/.cache/oracleaudit").expanduser())
