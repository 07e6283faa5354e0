"""One input of the pool (`PoolEntry`): how it is made from a problem's `get_inputs()`, bit-for-bit on the CPU.

The pool file's format and the derivations are described in `oracleaudit.pool`. Two entry fields describe
how a checker draws beyond one seeded call:

- `draw = k` (default 1): the entry is the k-th `get_inputs()` call after `torch.manual_seed(seed)`, the
  global RNG (and a drawn distribution's generator) continuing between calls, as a checker that draws
  several configurations after one seed sees them (KernelBench-verified's hidden configs after its last
  trial; SOL-ExecBench's rounds after one seed).
- `math_mode` (default "default"): the TF32 flags under which the pair runs and its fp32 reference is
  computed: "default" (PyTorch's: matmul off, cuDNN on), "no_tf32" (both off, as robust-kbench sets them) or
  "tf32" (both on).

- `weights = "trial"` (default "fixed"): the Model and ModelNew are built after `torch.manual_seed` of the
  entry's own seed, as a checker that rebuilds both models per trial seed does (robust-kbench); "fixed"
  builds them after KernelBench's seed 42 for every input.

Each appears in the entry's key when not at its default (`normal/draw=3/s=200/official`,
`normal/math=no_tf32/s=734796314/official`, `normal/weights=trial/s=0/official`; `oracleaudit.pool.key`).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import torch

from oracleaudit.errors import OracleAuditError
from oracleaudit.kernelbench import WEIGHT_SEED
from oracleaudit.pool.distributions import Distribution, Official
from oracleaudit.pool.key import ENTRY_MATH_MODES
from oracleaudit.pool.shapes import input_shapes
from oracleaudit.problem import Problem, load_problem_module
from oracleaudit.tensors import to_device

MATH_MODES = ENTRY_MATH_MODES
MAX_DRAW = 1000


def tf32_flags(math_mode: str) -> tuple[bool, bool] | None:
    """(torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) a math mode sets; None for
    "default", which leaves the flags as PyTorch has them."""
    return {"default": None, "no_tf32": (False, False), "tf32": (True, True)}[math_mode]


@contextlib.contextmanager
def math_flags(math_mode: str) -> Iterator[None]:
    """The TF32 flags of `math_mode` for the duration of the block, the previous flags restored after."""
    flags = tf32_flags(math_mode)
    if flags is None:
        yield
        return
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def recorded_mode(math_mode: str, device: str) -> dict[str, Any]:
    """The store's columns of a math mode: the TF32 flags and matmul precision in effect under it (PyTorch's
    own for "default": cuDNN TF32 on, matmul off), and the device."""
    with math_flags(math_mode):
        return {"ref_matmul_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                "ref_cudnn_tf32": bool(torch.backends.cudnn.allow_tf32),
                "ref_matmul_precision": torch.get_float32_matmul_precision(), "ref_device": device}


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """`torch.manual_seed(seed)` for the duration, the global CPU RNG state restored afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _replace_floats(value: Any, dist: Distribution, generator: torch.Generator) -> Any:
    if isinstance(value, list):
        return [_replace_floats(v, dist, generator) for v in value]
    if isinstance(value, tuple):
        return tuple(_replace_floats(v, dist, generator) for v in value)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        drawn = dist.draw(value.detach().cpu(), generator)
        return drawn.to(value.device)
    return value


def _replaced(inputs: list, dist: Distribution, generator: torch.Generator, times: int) -> list:
    """`inputs` with their floats replaced by the `times`-th draw of `dist` from `generator` (each call of
    get_inputs() returns the same shapes, so the earlier draws are those of the earlier calls)."""
    for _ in range(times):
        replaced = _replace_floats(inputs, dist, generator)
    return replaced


# The torch functions get_inputs() draws float tensors with, replaced while it runs under `derive = "draws"`.
DRAW_FUNCTIONS = ("rand", "randn", "rand_like", "randn_like")
DERIVATIONS = ("outputs", "draws")
_DRAWING = threading.Lock()  # the replacement is of torch's module attributes: one get_inputs() at a time


@contextlib.contextmanager
def _drawing(dist: Distribution, generator: torch.Generator) -> Iterator[list[int]]:
    """For the block, each float tensor that `torch.rand`/`randn`/`rand_like`/`randn_like` draws is drawn as
    usual (so the global RNG, and every later draw such as integer labels, advances exactly as in the
    official inputs), then replaced by `dist.draw(that tensor, generator)`. Yields a one-item list counting
    the replaced draws."""
    count = [0]
    inside = [False]  # the distribution's own draws use the real functions

    def replacing(real):
        def draw(*args, **kwargs):
            value = real(*args, **kwargs)
            if inside[0] or not (isinstance(value, torch.Tensor) and value.is_floating_point()):
                return value
            count[0] += 1
            inside[0] = True
            try:
                drawn = dist.draw(value.detach().cpu(), generator).to(value.device)
            finally:
                inside[0] = False
            return drawn.requires_grad_(value.requires_grad)
        return draw

    with _DRAWING:
        originals = {name: getattr(torch, name) for name in DRAW_FUNCTIONS}
        try:
            for name, real in originals.items():
                setattr(torch, name, replacing(real))
            yield count
        finally:
            for name, real in originals.items():
                setattr(torch, name, real)


@dataclass(frozen=True)
class PoolEntry:
    """One input of the pool: distribution × seed × shape variant (× scale), named by a stable key.

    Entries from `Pool.entries` are not yet resolved for a problem (`overrides` is None); entries from
    `Pool.entries_for(problem)` carry the constant overrides and input shapes of their variant for that
    problem and can make inputs.
    """

    key: str
    distribution: str
    seed: int
    shape: str  # the shape variant: official, odd, small or batch
    scale: float
    params: tuple[tuple[str, Any], ...]
    dist: Distribution = field(compare=False)
    index: int = 0
    """The 1-based position of the pool file entry this input comes from."""
    overrides: tuple[tuple[str, int], ...] | None = None
    input_shapes: tuple[tuple[int, ...] | None, ...] | None = None
    derive: str = "outputs"
    """How a drawn (not official-based) distribution makes the inputs: "outputs" replaces each float tensor
    of get_inputs()'s result; "draws" replaces each float tensor get_inputs() draws, as it is drawn."""
    draw: int = 1
    """Which `get_inputs()` call after the seed this entry is (1: the first); see the module docstring."""
    math_mode: str = "default"
    """The TF32 flags the pair and its fp32 reference run under (`MATH_MODES`)."""
    weights: str = "fixed"
    """"fixed": the models are built after KernelBench's weight seed; "trial": after this entry's seed."""

    @property
    def weight_seed(self) -> int:
        """The seed `torch.manual_seed` gets before the Model and ModelNew are built for this input."""
        return self.seed if self.weights == "trial" else WEIGHT_SEED

    @property
    def resolved(self) -> bool:
        return self.overrides is not None

    def load_problem(self, problem: Problem | Path) -> ModuleType:
        """The problem module with this entry's shape constants set (a fresh module)."""
        self._require_resolved()
        return load_problem_module(problem, dict(self.overrides or ()))

    def make_inputs(self, problem_module: ModuleType, device: str | torch.device = "cpu") -> list:
        """This entry's inputs for a problem module loaded with the entry's overrides (see `load_problem`).

        Deterministic: the same entry and problem file give bitwise-identical tensors (drawn on the CPU,
        then moved to `device`). The caller's global RNG state is left as it was.
        """
        self._require_resolved()
        for name, value in self.overrides or ():
            actual = getattr(problem_module, name, None)
            if actual != value:
                raise OracleAuditError(
                    f"pool entry {self.key}: the problem module has {name}={actual!r}, the entry needs {value} "
                    "(load it with entry.load_problem(problem))"
                )
        generator = torch.Generator(device="cpu").manual_seed(self.seed)
        if self.derive == "draws" and not self.dist.official_based:
            with _seeded(self.seed), _drawing(self.dist, generator) as drawn:
                for _ in range(self.draw):
                    inputs = list(problem_module.get_inputs())
            if not drawn[0]:  # get_inputs() draws with none of DRAW_FUNCTIONS: its floats are replaced
                inputs = _replaced(inputs, self.dist, generator, self.draw)
        else:
            with _seeded(self.seed):
                for _ in range(self.draw):
                    inputs = list(problem_module.get_inputs())
            if not isinstance(self.dist, Official):
                inputs = _replaced(inputs, self.dist, generator, self.draw)
        if self.input_shapes is not None and input_shapes(inputs) != self.input_shapes:
            raise OracleAuditError(
                f"pool entry {self.key}: get_inputs() gave shapes {list(input_shapes(inputs))}, the pool recorded "
                f"{list(self.input_shapes)} for this problem (was the problem file changed?)"
            )
        return to_device(inputs, device)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "distribution": self.distribution,
            "params": dict(self.params),
            "draw": self.dist.describe(),
            "seed": self.seed,
            "shape": self.shape,
            "scale": self.scale,
            "derive": self.derive,
            **({"draw": self.draw} if self.draw != 1 else {}),  # absent at the default: digests stay as they were
            **({"math_mode": self.math_mode} if self.math_mode != "default" else {}),
            **({"weights": self.weights} if self.weights != "fixed" else {}),
            "overrides": dict(self.overrides) if self.overrides is not None else None,
            "input_shapes": ([list(s) if s is not None else None for s in self.input_shapes]
                             if self.input_shapes is not None else None),
        }

    def _require_resolved(self) -> None:
        if self.overrides is None:
            raise OracleAuditError(
                f"pool entry {self.key} is not resolved for a problem; take it from Pool.entries_for(problem)"
            )
