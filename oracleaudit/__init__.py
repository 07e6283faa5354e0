"""oracleaudit: mutation analysis of the correctness checkers of GPU-kernel benchmarks."""

from oracleaudit.errors import OracleAuditError

__version__ = "0.1.0"

__all__ = ["OracleAuditError", "__version__"]
