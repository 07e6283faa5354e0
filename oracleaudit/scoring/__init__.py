"""Scoring (stage 3): oracle protocols applied to an evidence store and its mutants — which witnessed mutants
each oracle kills, which escape, how often it rejects the original kernels — and the analyses built on it.

Reading
    `Audit.load(evidence, mutants)` reads the store once into `Observations` (flat numpy columns; the error
    hulls as flat point arrays with the row each point belongs to) and joins `mutants.jsonl`. Scored mutants
    are the compiled, non-equivalent ones (status Pending) that have rows in the store. The kill witness
    (`witness.py`) is derived when the audit is loaded.

Verdicts (`Audit.verdicts(oracle)`), exact and vectorised over the rows
    For each stage of the protocol, every row of a kernel (a mutant or the original) on an input the stage
    draws gets a state: pass, skip or fail. A non-Ok status fails or skips as the stage's status policy says;
    an Ok row is judged by the rule on the evidence against the protocol's reference (fp32_* or fp64_*):
    allclose replayed on the stored hull points with PyTorch's own operations in the comparison dtype (the
    verdict torch.allclose gives on the raw tensors), the fraction within tolerance from the grid counts,
    the metrics, all-zero, repeat and timeout flags. A trial is one (stage, input) of one kernel: it fails if
    any of its output rows fails. A kernel is rejected ("killed") if any trial fails. Inputs the stage names
    that a problem lacks, and inputs without a reference row (`missing_reference = "skip"`), are not drawn.

    Verdicts are exact except where the evidence cannot tell (counted as `inexact_verdicts`): an incomplete
    hull whose tolerance line passes within rounding of it (`ErrorEvidence.is_exact`), and the NaN rules that
    need to know whether the output (or the reference) holds any non-finite value where the counts leave it
    open (an Inf counted in `n_inf_mismatch` or next to a NaN of the other side); such a value is taken to be
    present.

Modules: `observations` (the store as columns), `witness` (the kill witness), `oracle` (protocol files),
`verdicts` (an oracle's verdicts), `audit` (`Audit`, scores), `outputs` (the --out folder), `analysis`.
"""

from oracleaudit.scoring.audit import Audit, score
from oracleaudit.scoring.observations import Observations
from oracleaudit.scoring.outputs import (
                                         ESCAPED_DIR,
                                         KILL_MATRIX_FILE,
                                         KILL_MATRIX_SCHEMA_VERSION,
                                         SCORES_FILE,
                                         UNWITNESSED_FILE,
                                         read_kill_matrix,
                                         write_outputs,
)
from oracleaudit.scoring.verdicts import Verdicts

__all__ = ["ESCAPED_DIR", "KILL_MATRIX_FILE", "KILL_MATRIX_SCHEMA_VERSION", "SCORES_FILE", "UNWITNESSED_FILE",
           "Audit", "Observations", "Verdicts", "read_kill_matrix", "score", "write_outputs"]
