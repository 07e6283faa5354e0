"""oracleaudit: mutation analysis of the correctness checkers of GPU-kernel benchmarks.

The public API, one name per stage's main entry point and data type. Names are imported on first use, so
`import oracleaudit` (and the CLI) stays fast and the GPU machine never imports tree-sitter or libclang
unless it mutates.
"""

from importlib import import_module
from typing import Any

from oracleaudit.errors import OracleAuditError

__version__ = "0.1.0"

_EXPORTS = {
    "mutate": "oracleaudit.mutation",
    "Mutant": "oracleaudit.mutant",
    "read_mutants": "oracleaudit.mutant",
    "verify_solutions": "oracleaudit.dataset.verify",
    "Pool": "oracleaudit.pool",
    "run": "oracleaudit.execution",
    "measure": "oracleaudit.execution.measure",
    "ErrorEvidence": "oracleaudit.evidence",
    "EvidenceStore": "oracleaudit.store",
    "Oracle": "oracleaudit.scoring.oracle",
    "Audit": "oracleaudit.scoring",
    "score": "oracleaudit.scoring",
    "minimize": "oracleaudit.minimization",
}

__all__ = ["OracleAuditError", "__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'oracleaudit' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
