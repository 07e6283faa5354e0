"""What happened when a kernel ran on one input: the `status` of an observation in the evidence store, and
the two pseudo mutant ids every problem has there."""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """An observation's status (a `str`: it is stored, compared and printed as its value)."""

    OK = "Ok"  # the kernel gave outputs; the evidence says how far they are from the references
    RUNTIME_ERROR = "RuntimeError"  # it raised, or crashed its process (a dead CUDA context)
    TIMEOUT = "Timeout"  # no result before the deadline
    SHAPE_MISMATCH = "ShapeMismatch"  # an output of another shape, or another number of outputs
    DTYPE_MISMATCH = "DtypeMismatch"  # an output of another dtype
    OOM = "OOM"  # out of GPU memory with the GPU to itself
    BUILD_ERROR = "BuildError"  # the mutant's clone does not compile with torch's flags: no valid mutant


FAILURES = (Status.RUNTIME_ERROR, Status.TIMEOUT, Status.OOM, Status.SHAPE_MISMATCH, Status.DTYPE_MISMATCH)
"""The statuses of a kernel that ran and gave no output to compare."""

ORIGINAL = "original"  # the mutant id of each problem's unmutated kernel
REFERENCE = "reference"  # the mutant id of the rows of each problem's fp32 reference against the fp64 one
