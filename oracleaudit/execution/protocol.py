"""The run stage's job and the messages between a GPU worker process and its supervisor.

A `Job` is one slice of one solution's work: which variants (the original and mutants) to observe on which
pool inputs. The worker (worker.py) answers through a pipe with the messages below, in this order:

    Ready                      once, when the process has CUDA up (a spare worker waits in this state)
    Built                      the job's extensions are loaded
    Rows(reference, input)     the fp32 reference's own rows, for the inputs the job records them for
    Started(variant, input)    before each (variant, input); the supervisor's deadline starts here
    Rows(variant, input)       after it: the observation rows (one per output tensor); none after a replay;
                               with the worker's seconds by phase since its last report
    Memory                     after the first (variant, input): the process's peak GPU memory so far
    Fatal                      the CUDA context died during (variant, input); the worker exits next
    Failed                     the job failed as a whole (the worker exits if its CUDA context is dead)
    Done                       the job is finished; the seconds by phase not reported yet

Messages are frozen dataclasses (picklable), so a test can script a worker without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oracleaudit.status import ORIGINAL, REFERENCE  # noqa: F401 (the job's variant names)


@dataclass(frozen=True)
class Job:
    """One solution's work, or a slice of it.

    `mutants` are all the solution's mutants as dicts (the build plan is made from all of them, so every
    slice loads the same extensions); `work` lists, in order, each variant to observe (the original first,
    if at all) with the pool input keys to observe it on. `record_references` names the inputs whose
    reference rows this job records. `time_original` names the inputs of the work on which the worker runs the
    original first without recording it (those where the original is not owed, and not timed yet), so the
    supervisor can scale every mutant's deadline by the original's time on its input. `replay` lists, for
    a fresh worker that continues a slice, each variant's inputs already recorded in a process that died (by
    another variant's fault): the worker runs them again, unrecorded and in their place in the order, so a
    variant keeps across inputs whatever state its process would have had (a static buffer, a call count).
    `cover` names inputs the supervisor observes even for a variant whose other inputs it infers (after
    repeated crashes or a hang): one input of each oracle the run serves at each shape
    (`scoring.oracle.input_cover`). `deciders` says per input which of the run's oracles draw it and which fail
    a trial with a crash or a hang there (`scoring.oracle.input_deciders`): after a variant's fault, inputs
    whose every drawing oracle saw it fail are not run (ledger.py). `faults` and `original_s` carry what a
    supervisor knew when it handed a variant that crashed or hung to another slot (supervisor.py): per variant
    its crashes so far, whether it hung, the inputs whose first deadline it missed and the oracles that saw it
    fail; the original's seconds per input. `first` names inputs the worker runs before the others, in that
    order: for a variant that crashed or hung, alone in its job, those that decide the most (ledger.py).
    A `warm` job has no work: its worker makes the inputs and references of `entry_keys` into the reference
    cache (references.py) without loading any build, and records nothing; the run gives such jobs to slots
    that would otherwise wait for the first builds (scheduler.py)."""

    solution: str
    problem_path: str
    problem: str
    mutants: tuple[dict, ...]
    pool: str
    entry_keys: tuple[tuple[str, int, str, str], ...]  # (key, seed, shape variant, distribution) per input
    build_dir: str
    shapes: tuple[tuple[str, tuple, tuple], ...] = ()  # (shape variant, overrides, input shapes) as resolved
    work: tuple[tuple[str, tuple[str, ...]], ...] = ()
    record_references: tuple[str, ...] = ()
    time_original: tuple[str, ...] = ()  # input keys (see above)
    replay: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (variant, input keys run again, unrecorded)
    cover: tuple[str, ...] = ()  # input keys never inferred
    unbuildable: tuple[tuple[str, str], ...] = ()  # (mutant id, compiler error) found when prebuilding
    device: str = "cuda:0"
    evidence_engine: str = "auto"  # measure.measure_many's engine: auto, torch or fused
    cpu_threads: int = 0  # torch's CPU threads in the worker (0: torch's default, every core)
    exclusive: bool = False  # run with the GPU to itself (a retry after an out-of-memory under contention)
    # (variant, crashes, hung, inputs missed once, indices of the `deciders` oracles that saw it fail)
    faults: tuple[tuple[str, int, bool, tuple[str, ...], tuple[int, ...]], ...] = ()
    # (input key, the run's oracles that draw it, those failing a trial with a RuntimeError there, a Timeout)
    deciders: tuple[tuple[str, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...] = ()
    original_s: tuple[tuple[str, float], ...] = ()  # (input key, the original's seconds there)
    first: tuple[str, ...] = ()  # input keys run before the others, in this order (plan.input_runs)
    warm: bool = False  # only the reference cache filled for `entry_keys` (see above)

    @property
    def pairs(self) -> int:
        """(variant, input) observations the job records."""
        return sum(len(inputs) for _, inputs in self.work)

    def variants(self) -> list[str]:
        return [variant for variant, _ in self.work]

    def entry(self, key: str) -> tuple[str, int, str, str]:
        for entry in self.entry_keys:
            if entry[0] == key:
                return entry
        raise KeyError(key)


@dataclass(frozen=True)
class Ready:
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class Built:
    seconds: float


@dataclass(frozen=True)
class Started:
    variant: str
    input: str
    replay: bool = False  # a pair of `Job.replay`: run again, not recorded


@dataclass(frozen=True)
class Rows:
    variant: str
    input: str
    rows: tuple[dict, ...]
    seconds: dict[str, float] = field(default_factory=dict)  # by phase, since the worker's last report


@dataclass(frozen=True)
class Memory:
    peak_bytes: int


@dataclass(frozen=True)
class Fatal:
    variant: str
    input: str
    message: str


@dataclass(frozen=True)
class Failed:
    message: str
    context_alive: bool
    out_of_memory: bool = False


@dataclass(frozen=True)
class Done:
    seconds: dict[str, float] = field(default_factory=dict)  # by phase (recorder.PHASES), since the last report
    peak_bytes: int = 0
