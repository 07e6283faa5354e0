"""The ledger of one job under supervision: what is still to observe of each variant, what is known of its faults
(crashes, hangs, deadlines missed, the oracles that saw it fail), the original's times; and the rows the
supervisor records itself for pairs the worker did not observe.

After a variant's crash or hang, an input is left out (an inferred row) where every oracle that draws it has
seen the variant fail already (`Job.deciders`: per input, the oracles of the run that draw it and those that
fail a trial with a RuntimeError or a Timeout there, from `scoring.oracle.input_deciders`). An oracle fails a
mutant on any failing trial, so no such oracle's verdict can change: in the bundled evidence this leaves out
1,167 crashes and 130 hangs of the 3,711 restarts of the complete run, and every catalog oracle's kills,
escapes and unobserved mutants stay the same (bench/results/fault_policy.json, policy "decided"). Inputs no
oracle of the run draws are kept, for oracles a user adds later.

Such a variant, alone in its job, runs first the inputs that would decide the others soonest should it fail on
each as it did before (`Ledger.deciding_order`, `Job.first`). Simulated on the bundled evidence (bench/
fault_policy.py, policy "decided-first"): 1,265 restarts saved against 1,167 in the job's own order, counting
as crashes the 233 pairs the order reaches that the evidence never observed (up to 1,498 if none crashes).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Container, Iterable

from oracleaudit.execution.protocol import Job
from oracleaudit.status import ORIGINAL, Status


def failure_row(job: Job, variant: str, key: str, status: str, error_class: str, message: str,
                inferred: bool | None = None) -> dict:
    """The one row of a pair the supervisor records itself: a hang or a death it saw (observed), or a pair
    it did not run (`inferred` True)."""
    _, seed, shape, distribution = job.entry(key)
    return {"mutant_id": variant, "problem": job.problem, "input_id": key, "input_seed": seed,
            "shape_variant": shape, "distribution": distribution, "output_index": 0, "status": status,
            "error_class": error_class, "error_message": message, "inferred": inferred}


def untimed(job: Job, work: dict[str, list[str]], timed: Container[str]) -> tuple[str, ...]:
    """The inputs of `work` (variant → input keys) the original must run on first, unrecorded, to time the
    mutants' deadlines: those it is not itself owed on and has no time for, in the job's input order. (A run
    stopped after some of the original's rows left it owed on the other inputs only; a mutant on a recorded
    input then waited under the original's deadline, ten minutes, for want of its time.)"""
    owed = set(work.get(ORIGINAL, ()))
    wanted = {key for variant, keys in work.items() if variant != ORIGINAL for key in keys}
    return tuple(key for key, *_ in job.entry_keys if key in wanted and key not in owed and key not in timed)


def deciding_order(keys: Iterable[str], deciders: dict, failed: Iterable[int], status: str, cover: Container[str],
                   position: dict[str, int]) -> tuple[str, ...]:
    """Which of a variant's inputs still to observe (`keys`) to run first, in order, so that were it to fail on
    each with `status` (a crash, or a hang) the rest would be decided soonest: greedily, the input whose
    oracles failing on `status` (`deciders`: per key, the oracles drawing it and those failing per status) take
    in most of those not yet `failed` that draw any of `keys` (ties: an input of the `cover`, then `position`),
    until none takes in one more."""
    todo = [key for key in keys if key in deciders]
    needed = set().union(*(deciders[key][0] for key in todo)) - set(failed)
    order: list[str] = []

    def takes(key: str) -> frozenset:
        return deciders[key][1].get(status, frozenset()) & needed

    while needed and todo:
        best = min(todo, key=lambda key: (-len(takes(key)), key not in cover, position.get(key, 0)))
        if not takes(best):
            break
        needed -= takes(best)
        order.append(best)
        todo.remove(best)
    return tuple(order)


class Ledger:
    """The state of one job under supervision: what is still to observe, and the original's times."""

    def __init__(self, job: Job):
        self.job = job
        self.work: dict[str, list[str]] = {variant: list(inputs) for variant, inputs in job.work if inputs}
        self.references = set(job.record_references)
        self.original_s: dict[str, float] = dict(job.original_s)
        self.crashes: Counter = Counter({variant: crashes for variant, crashes, *_ in job.faults})
        # pairs that missed their deadline once: waited for longer
        self.missed: set[tuple[str, str]] = {(variant, key) for variant, _, _, keys, _ in job.faults for key in keys}
        self.failed_by: dict[str, set[int]] = {variant: set(oracles) for variant, *_, oracles in job.faults}
        self.deciders = {key: (frozenset(draws), {Status.RUNTIME_ERROR: frozenset(crash),
                                                  Status.TIMEOUT: frozenset(hang)})
                         for key, draws, crash, hang in job.deciders}
        self.alone: dict[str, list[str]] = {}
        self.history: dict[str, list[str]] = {}  # inputs each variant ran in its process state (Job.replay)
        self.hung: set[str] = {variant for variant, _, hung, *_ in job.faults if hung}  # a recorded Timeout
        self.deferred: set[str] = set()  # variants that crashed or hung: run after the others, one by one
        self.sent: set[str] = set()  # the variants of the job sent last
        self.current: tuple[str, str] | None = None
        self.replaying = False  # the current pair is a replay
        self.started = 0.0
        self.stalled_at = 0.0  # the GPU's stalled seconds when the current pair started (stalls.py)
        self.error: str | None = None

    def remaining(self) -> bool:
        return bool(self.work or self.references)

    def faulted(self, variant: str) -> bool:
        """Whether the variant crashed or hung, in this job or before it was handed off."""
        return variant in self.hung or bool(self.crashes[variant])

    def owed(self, variant: str, key: str) -> bool:
        return key in self.work.get(variant, ())

    def take(self, variant: str, key: str) -> None:
        inputs = self.work.get(variant)
        if inputs is not None and key in inputs:
            inputs.remove(key)
            if not inputs:
                del self.work[variant]

    def fail(self, variant: str, key: str, status: str) -> list[str]:
        """The variant crashed (`Status.RUNTIME_ERROR`) or hung on `key`: the oracles failing a trial with that
        status there have seen it fail. Returns, and takes out of the work, its inputs still to observe whose
        every drawing oracle has now seen it fail."""
        draws, fails = self.deciders.get(key, (frozenset(), {}))
        failed = self.failed_by.setdefault(variant, set())
        failed.update(fails.get(status, ()))
        decided = [k for k in self.work.get(variant, ()) if k in self.deciders and self.deciders[k][0]
                   and self.deciders[k][0] <= failed]
        for k in decided:
            self.take(variant, k)
        return decided

    def next_job(self) -> Job:
        """The job for a (fresh) worker: what is left of the variants not deferred, else the first deferred
        variant alone; the original run first, unrecorded, on each input of the work it is not owed on and
        has no time for yet, so no mutant pair waits under the original's own deadline."""
        work = {v: i for v, i in self.work.items() if v not in self.deferred}
        if not work and self.work:
            variant = min(self.work)
            work = {variant: self.work[variant]}
        self.sent = set(work)
        first = self.deciding_order(next(iter(work))) if len(work) == 1 else ()
        return replace(self.job, work=tuple((v, tuple(i)) for v, i in work.items()), first=first,
                       record_references=tuple(sorted(self.references)),
                       time_original=untimed(self.job, work, self.original_s),
                       replay=tuple((v, tuple(self.history[v])) for v in work if self.history.get(v)))

    def deciding_order(self, variant: str) -> tuple[str, ...]:
        """For a variant that crashed or hung, the inputs it has still to observe to run first (`deciding_order`,
        with its fault: a hang if it hung); () for a variant that has not failed."""
        if not self.faulted(variant):
            return ()
        status = Status.TIMEOUT if variant in self.hung else Status.RUNTIME_ERROR
        position = {key: index for index, (key, *_) in enumerate(self.job.entry_keys)}
        return deciding_order(self.work.get(variant, ()), self.deciders, self.failed_by.get(variant, set()), status,
                              set(self.job.cover), position)

    def split_off(self, variant: str) -> Job:
        """Take the variant's remaining inputs out of this slice, as a job of its own that carries what is known
        of it (its crashes, hang, missed deadlines and failing oracles; the original's times)."""
        inputs = self.work.pop(variant)
        self.deferred.discard(variant)
        faults = (variant, self.crashes[variant], variant in self.hung,
                  tuple(key for v, key in sorted(self.missed) if v == variant),
                  tuple(sorted(self.failed_by.get(variant, ()))))
        return replace(self.job, work=((variant, tuple(inputs)),), record_references=(), time_original=(), replay=(),
                       faults=(faults,), original_s=tuple(sorted(self.original_s.items())))

    def forget(self, variant: str) -> None:
        """The variant starts from a fresh process state: after its own crash, or a replay that failed."""
        self.history.pop(variant, None)

    def defer(self, variant: str) -> None:
        """The variant crashed or hung: a fresh state, and its remaining inputs after the others'."""
        self.forget(variant)
        if variant != ORIGINAL:
            self.deferred.add(variant)
