"""The supervisor's protocol on the CPU: a scripted worker stands in for the GPU worker process and
misbehaves on cue (crash, death, hang, out of memory, job failure); the supervisor must record every
(variant, input) pair exactly once, observed or inferred, and restart workers as the worker process would
need."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field, replace

import pytest

from oracleaudit.execution.protocol import (
    ORIGINAL,
    REFERENCE,
    Built,
    Done,
    Failed,
    Fatal,
    Job,
    Memory,
    Ready,
    Rows,
    Started,
)
from oracleaudit.execution.supervisor import SPARES, SliceResult, Supervisor

INPUTS = ("a/s=0/official", "b/s=1/official", "c/s=2/odd")
MUTANTS = ("m1", "m2", "m3")
PAIR_S = 0.25  # the seconds a scripted worker reports with each pair's rows (Done reports 0.5 of execution)
SLOW_S = 1.5  # how long a "slow" pair takes: past a 1 s deadline, within twice it


def make_job(variants=(ORIGINAL, *MUTANTS), inputs=INPUTS, references=INPUTS) -> Job:
    return Job(solution="/s/1_X.py", problem_path="/p/level1/1_X.py", problem="level1/1_X", mutants=(),
               pool="default", entry_keys=tuple((key, n, key.rsplit("/", 1)[1], key.split("/")[0])
                                                for n, key in enumerate(inputs)),
               build_dir="/b", work=tuple((v, tuple(inputs)) for v in variants), record_references=tuple(references))


def ok_row(variant: str, key: str, status: str = "Ok") -> dict:
    return {"mutant_id": variant, "problem": "level1/1_X", "input_id": key, "input_seed": 0,
            "shape_variant": "official", "distribution": "a", "output_index": 0, "status": status}


@dataclass
class World:
    """What the scripted workers do: `behaviour[(variant, input)]` is a list of actions, one taken per
    attempt (the last repeats): ok, slow (ok after SLOW_S), oom, crash (Fatal), die (the process vanishes), hang,
    fail (job failure, context alive), fail-dead (job failure, context dead), fail-oom; a replay's under
    `("replay:" + variant, input)`. `by_input`: the workers take every variant on one input, then the next
    (else variant by variant); `replayed` lists the replays they ran, job by job."""

    behaviour: dict = field(default_factory=dict)
    by_input: bool = False
    replayed: list = field(default_factory=list)
    started: int = 0
    jobs: list = field(default_factory=list)
    events: list = field(default_factory=list)  # ("made", n) and ("job", n) of worker n, in order
    attempts: dict = field(default_factory=dict)
    warm_s: float = 0.0  # how long a warm-up job (Job.warm) takes
    warming: int = 0  # warm-up jobs running now, and the most at once
    most_warming: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def action(self, variant: str, key: str) -> str:
        plan = self.behaviour.get((variant, key), ["ok"])
        n = self.attempts.get((variant, key), 0)
        self.attempts[(variant, key)] = n + 1
        return plan[min(n, len(plan) - 1)]


def work_with_timing(job: Job) -> list[tuple[str, list[str]]]:
    """A job's work as a worker runs it: the original first, on its own inputs and on those the job asks it
    to be timed on (`time_original`, unrecorded), in the job's input order."""
    work = {v: list(i) for v, i in job.work}
    if job.time_original:
        timed = set(work.pop(ORIGINAL, ())) | set(job.time_original)
        work = {ORIGINAL: [key for key, *_ in job.entry_keys if key in timed], **work}
    return list(work.items())


class ScriptedWorker:
    """A worker process stand-in: a thread answering jobs with protocol messages."""

    def __init__(self, world: World):
        world.started += 1
        self.serial = world.started
        world.events.append(("made", self.serial))
        self.world = world
        self.outbox: queue.Queue = queue.Queue()
        self.dead = False
        self.hanging = threading.Event()
        self.exitcode = None
        self.outbox.put(Ready(80 << 30, 79 << 30))

    def send(self, job) -> None:
        if job is None:
            return
        self.world.jobs.append(job)
        self.world.events.append(("job", self.serial))
        threading.Thread(target=self._run, args=(job,), daemon=True).start()

    def _run(self, job: Job) -> None:
        put = self.outbox.put
        put(Built(0.01))
        if job.warm:
            self._warm(job)
            return
        for key in job.record_references:
            put(Rows(REFERENCE, key, (ok_row(REFERENCE, key),)))
        work = work_with_timing(job)
        replay = dict(job.replay)
        order = [*job.first, *(key for key, *_ in job.entry_keys if key not in job.first)]  # as plan.input_runs
        pairs = [(v, k, k not in inputs) for v, inputs in work for k in order
                 if k in inputs or k in replay.get(v, ())]
        if self.world.by_input:
            pairs.sort(key=lambda p: order.index(p[1]))  # stable: the variants keep their order
        replayed = []
        self.world.replayed.append(replayed)
        first = True
        for variant, key, again in pairs:
            put(Started(variant, key, again))
            action = self.world.action(("replay:" if again else "") + variant, key)
            if action == "hang":
                self.hanging.wait()
                return
            if action == "slow" and self.hanging.wait(SLOW_S):
                return  # killed meanwhile
            if action == "die":
                self._die(None)
                return
            if action == "crash":
                if not again:
                    put(Rows(variant, key, (ok_row(variant, key, "RuntimeError"),), {"evidence": PAIR_S}))
                put(Fatal(variant, key, "CUDA error: an illegal memory access was encountered"))
                self._die(3)
                return
            if action.startswith("fail"):
                put(Failed("RuntimeError: boom", action != "fail-dead", action == "fail-oom"))
                if action == "fail-dead":
                    self._die(3)
                return
            if again:
                replayed.append((variant, key))
                put(Rows(variant, key, (), {"replay": PAIR_S}))
                continue
            put(Rows(variant, key, (ok_row(variant, key, "OOM" if action == "oom" else "Ok"),), {"evidence": PAIR_S}))
            if first:
                put(Memory(1 << 30))
                first = False
        put(Done({"execution": 0.5}, 1 << 30))

    def _warm(self, job: Job) -> None:
        world = self.world
        with world.lock:
            world.warming += 1
            world.most_warming = max(world.most_warming, world.warming)
        self.hanging.wait(world.warm_s)
        with world.lock:
            world.warming -= 1
        self.outbox.put(Done({"references": world.warm_s}, 1 << 20))

    def _die(self, code) -> None:
        self.exitcode = code
        self.outbox.put(EOFError)

    def poll(self, timeout: float) -> bool:
        if self.dead:
            return True
        try:
            item = self.outbox.get(timeout=timeout)
        except queue.Empty:
            return False
        self.outbox.queue.appendleft(item)
        return True

    def recv(self):
        if self.dead:
            raise EOFError
        item = self.outbox.get()
        if item is EOFError:
            self.dead = True
            raise EOFError
        return item

    def kill(self) -> None:
        self.dead = True
        self.hanging.set()

    def close(self) -> None:
        self.kill()


def supervise(world: World, job: Job, shared: bool = False, **options) -> tuple[SliceResult, dict, Supervisor]:
    recorded: dict[tuple[str, str], list[dict]] = {}

    def on_rows(variant: str, rows: list[dict]) -> None:
        key = (variant, rows[0]["input_id"])
        assert key not in recorded, f"{key} recorded twice"
        recorded[key] = rows

    options = {"timeout_factor": 1.0, "timeout_floor_s": 0.3, **options}
    supervisor = Supervisor(0, on_rows, start=lambda gpu: ScriptedWorker(world), **options)
    try:
        result = supervisor.run(job, shared=lambda: shared)
    finally:
        supervisor.close()
    return result, recorded, supervisor


def every_pair(job: Job) -> set[tuple[str, str]]:
    return {(v, k) for v, inputs in job.work for k in inputs} | {(REFERENCE, k) for k in job.record_references}


def status(recorded, variant, key) -> tuple[str, bool]:
    row = recorded[(variant, key)][0]
    return row["status"], bool(row.get("inferred"))


def test_a_well_behaved_worker_gets_every_pair_recorded_once_by_one_process() -> None:
    world, job = World(), make_job()
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert result.pairs == 12 and world.started == 1 and supervisor.restarts == 0
    assert result.seconds["execution"] == 0.5 and result.peak_bytes == 1 << 30
    assert result.seconds["evidence"] == 12 * PAIR_S


def test_a_crash_on_one_input_is_recorded_and_the_variant_goes_on_in_a_fresh_worker() -> None:
    world, job = World({("m2", INPUTS[1]): ["crash"]}), make_job()
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert status(recorded, "m2", INPUTS[1]) == ("RuntimeError", False)
    assert status(recorded, "m2", INPUTS[2]) == ("Ok", False)  # observed after the crash, not a hole
    assert supervisor.restarts == 1 and result.crashes == 1 and result.hangs == 0
    resumed, deferred = world.jobs[1:]
    assert resumed.variants() == ["m3"] and ORIGINAL not in resumed.variants()
    assert resumed.time_original == ()  # the original's times are already known
    assert resumed.record_references == ()
    # m2 crashed: its remaining input runs after the others', alone, in the same fresh worker; the crash
    # started SPARES workers, and taking the first of them one more, for next restarts
    assert deferred.work == (("m2", (INPUTS[2],)),) and world.started == 2 + SPARES
    assert [n for what, n in world.events if what == "job"] == [1, 2, 2]


def test_from_the_first_restart_on_each_fresh_worker_was_started_before_the_fault_it_replaces() -> None:
    """A fresh worker costs a CUDA context (about a second): with one spare, after the first restart each one
    taken was started while the worker before it ran, not at the fault, so a restart does not wait for its
    start."""
    world = World({("m1", key): ["crash"] for key in INPUTS})
    job = make_job()
    result, recorded, supervisor = supervise(world, job, max_crashes=0, spares=1)
    assert set(recorded) == every_pair(job) and supervisor.restarts == 3
    served = [(i, n) for i, (what, n) in enumerate(world.events) if what == "job"]
    # worker 1 crashes on m1's first input; worker 2 (started at that crash) runs the others, then m1's
    # deferred inputs, and crashes; worker 3 takes over, the last crash leaves nothing to run
    assert [n for _, n in served] == [1, 2, 2, 3]
    made = {n: i for i, (what, n) in enumerate(world.events) if what == "made"}
    assert made[2] > served[0][0]  # the first restart's worker: started at the fault
    assert made[3] < served[2][0]  # the second's: started when worker 2 was taken, before it even ran m1
    assert world.started == 4  # worker 4, started when worker 3 was taken: a spare never needed, closed

    world = World({("m1", key): ["crash"] for key in INPUTS})
    supervise(world, job, max_crashes=0, spares=0)  # as before: each restart's worker made at its fault
    served = [i for i, (what, n) in enumerate(world.events) if what == "job"]
    made = {n: i for i, (what, n) in enumerate(world.events) if what == "made"}
    assert made[3] > served[2]


def test_with_two_spares_each_of_a_crash_chain_s_workers_was_started_two_faults_ahead() -> None:
    """`spares=2`: from the first restart on, two workers are kept started ahead, so a variant that crashes on
    every input takes workers started two faults before, while the ones before them ran; the first restart
    starts both; the spares never taken are closed with the supervisor."""
    world = World({("m1", key): ["crash"] for key in INPUTS})
    job = make_job()
    result, recorded, supervisor = supervise(world, job, max_crashes=0, spares=2)
    assert set(recorded) == every_pair(job) and supervisor.restarts == 3
    served = [i for i, (what, n) in enumerate(world.events) if what == "job"]
    made = {n: i for i, (what, n) in enumerate(world.events) if what == "made"}
    assert [n for what, n in world.events if what == "job"] == [1, 2, 2, 3]
    assert served[0] < made[2] < made[3] < served[1]  # the first fault starts two: 3 is up before 2 runs
    assert made[4] < served[1] and made[5] < served[3]  # each taking starts the next
    assert world.started == 5 and supervisor.spares == []  # 4 and 5, never needed, closed


def test_a_dead_worker_s_seconds_count_up_to_its_last_pair_and_replays_have_their_own_phase() -> None:
    """The seconds come pair by pair with the rows: the worker that crashed on m2's second input never says
    Done, yet the pairs it finished count; the fresh worker's replays count as replay."""
    world, job = World({("m2", INPUTS[1]): ["crash"]}, by_input=True), make_job()
    result, recorded, _ = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.crashes == 1
    observed = len([k for k in recorded if k[0] != REFERENCE])
    assert result.seconds["evidence"] == observed * PAIR_S  # the crashed pair's rows came with its seconds
    assert result.seconds["replay"] == result.replays * PAIR_S == 5 * PAIR_S
    assert result.seconds["execution"] == 2 * 0.5  # Done from the two workers that finished their jobs


def test_after_another_variant_s_crash_the_fresh_worker_first_replays_what_each_variant_ran() -> None:
    """Input by input, m2's crash on b kills a process in which the original, m1 and m3 had run: the fresh
    worker runs their recorded inputs again, unrecorded, so a variant's state across inputs (a static
    buffer) is what it would have been; m2 itself starts afresh, as after its own crash alone."""
    world, job = World({("m2", INPUTS[1]): ["crash"]}, by_input=True), make_job()
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert supervisor.restarts == 1 and result.crashes == 1
    resumed = world.jobs[1]
    assert dict(resumed.replay) == {ORIGINAL: INPUTS[:2], "m1": INPUTS[:2], "m3": INPUTS[:1]}
    assert world.replayed == [[], [(ORIGINAL, INPUTS[0]), ("m1", INPUTS[0]), ("m3", INPUTS[0]),
                                   (ORIGINAL, INPUTS[1]), ("m1", INPUTS[1])], []]
    assert world.jobs[2].work == (("m2", (INPUTS[2],)),) and world.jobs[2].replay == ()
    assert result.replays == 5


def test_after_a_hang_s_kill_the_fresh_worker_replays_the_other_variants_history_not_the_hung_one_s() -> None:
    world, job = World({("m1", INPUTS[1]): ["hang"]}, by_input=True), make_job()
    result, recorded, _ = supervise(world, job)
    assert set(recorded) == every_pair(job) and status(recorded, "m1", INPUTS[1]) == ("Timeout", False)
    assert dict(world.jobs[1].replay) == {ORIGINAL: INPUTS[:2], "m2": INPUTS[:1], "m3": INPUTS[:1]}
    assert ("m2", INPUTS[0]) in world.replayed[1] and result.hangs == 2  # its deadline, then twice it


def test_a_variant_that_keeps_crashing_runs_after_the_others_so_its_crashes_replay_nothing_more() -> None:
    world = World({("m1", key): ["crash"] for key in INPUTS}, by_input=True)
    job = make_job()
    result, recorded, supervisor = supervise(world, job, max_crashes=0)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert [status(recorded, "m1", k) for k in INPUTS] == [("RuntimeError", False)] * 3
    # one replay, of the original's first input after m1's first crash; m1's later crashes end workers of
    # its own, once the others are done
    assert [r for replays in world.replayed for r in replays] == [(ORIGINAL, INPUTS[0])]
    assert [j.variants() for j in world.jobs[2:]] == [["m1"], ["m1"]]
    assert supervisor.restarts == 3 and result.crashes == 3


@pytest.mark.parametrize("fault", ["crash", "hang", "die"])
def test_a_replay_that_fails_drops_that_variant_s_replay_and_records_nothing(fault) -> None:
    world = World({("m2", INPUTS[1]): ["crash"], ("replay:m1", INPUTS[0]): [fault]}, by_input=True)
    job = make_job()
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert all(status(recorded, v, k) == ("Ok", False) for v, k in every_pair(job) if v == "m1")
    assert result.crashes == 1 and result.hangs == 0 and supervisor.restarts == 2
    assert "m1" not in dict(world.jobs[2].replay) and dict(world.jobs[2].replay)["m3"] == INPUTS[:1]


def test_a_variant_that_keeps_crashing_has_its_remaining_inputs_inferred_after_max_crashes() -> None:
    world = World({("m1", key): ["crash"] for key in INPUTS})
    job = make_job(inputs=INPUTS)
    result, recorded, supervisor = supervise(world, job, max_crashes=1)
    assert set(recorded) == every_pair(job)
    assert [status(recorded, "m1", k) for k in INPUTS] == [("RuntimeError", False), ("RuntimeError", False),
                                                           ("RuntimeError", True)]
    assert "more than --max-crashes 1" in recorded[("m1", INPUTS[2])][0]["error_message"]
    assert supervisor.restarts == 2


def test_past_max_crashes_the_cover_inputs_are_still_observed_and_only_the_rest_inferred() -> None:
    from dataclasses import replace

    world = World({("m1", key): ["crash"] for key in INPUTS})
    job = replace(make_job(inputs=INPUTS), cover=(INPUTS[2],))
    result, recorded, supervisor = supervise(world, job, max_crashes=1)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert [status(recorded, "m1", k) for k in INPUTS] == [("RuntimeError", False)] * 3  # nothing inferred
    assert supervisor.restarts == 3 and result.crashes == 3


def test_a_hung_variant_is_still_observed_on_the_cover_once_each_and_inferred_elsewhere() -> None:
    from dataclasses import replace

    inputs = (*INPUTS, "d/s=3/official")
    world = World({("m3", key): ["hang"] for key in inputs})
    job = replace(make_job(inputs=inputs, references=()), cover=(inputs[0], inputs[3]))
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert [status(recorded, "m3", k) for k in inputs] == [("Timeout", False), ("Timeout", True),
                                                           ("Timeout", True), ("Timeout", False)]
    assert "after it hung on another input" in recorded[("m3", inputs[3])][0]["error_message"]
    # the first hang is waited for to twice its deadline (two misses, one kill); the cover input after it is
    # not: three misses in all, two kills
    assert result.hangs == 3 and supervisor.restarts == 2


def test_with_no_crash_limit_every_input_is_observed() -> None:
    world = World({("m1", key): ["crash"] for key in INPUTS})
    _, recorded, supervisor = supervise(world, make_job(), max_crashes=0)
    assert [status(recorded, "m1", k) for k in INPUTS] == [("RuntimeError", False)] * 3
    assert supervisor.restarts == 3


def test_a_hang_is_a_timeout_there_and_inferred_on_the_variant_s_other_inputs() -> None:
    world = World({("m3", INPUTS[0]): ["hang"]})
    job = make_job()
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert status(recorded, "m3", INPUTS[0]) == ("Timeout", False)
    assert [status(recorded, "m3", k) for k in INPUTS[1:]] == [("Timeout", True)] * 2
    assert "hung on a/s=0/official" in recorded[("m3", INPUTS[1])][0]["error_message"]
    # missed once (the 0.3 s floor), then waited for in place to twice the deadline: two misses, one kill
    assert supervisor.restarts == 1 and result.hangs == 2 and result.seconds["hung"] >= 0.59
    # the deadline scales with the original's time on that input (here: the floor and ~0), doubled the 2nd time
    assert "within 1 s, waited for after missing the first deadline" in recorded[("m3", INPUTS[0])][0]["error_message"]


def test_a_pair_past_its_first_deadline_is_waited_for_in_place_and_recorded_as_it_ends() -> None:
    """A worker stalled (by neighbours on a shared GPU and CPU) is not the variant's hang: past its 1 s
    deadline the pair is waited for, in the same worker, up to twice it; it ends after 1.5 s and its rows are
    recorded as observed; no worker is killed, nothing is inferred or run again."""
    world = World({("m3", INPUTS[0]): ["slow"]})
    job = make_job()
    result, recorded, supervisor = supervise(world, job, timeout_floor_s=1.0)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert [status(recorded, "m3", k) for k in INPUTS] == [("Ok", False)] * 3
    assert supervisor.restarts == 0 and result.hangs == 1 and world.started == 1
    assert world.attempts[("m3", INPUTS[0])] == 1


def test_a_worker_that_dies_without_a_word_costs_one_row_not_the_rest() -> None:
    world = World({("m1", INPUTS[0]): ["die"]})
    job = make_job()
    _, recorded, _ = supervise(world, job)
    assert set(recorded) == every_pair(job)
    row = recorded[("m1", INPUTS[0])][0]
    assert (row["status"], row["error_class"]) == ("RuntimeError", "WorkerDied")
    assert status(recorded, "m1", INPUTS[1]) == ("Ok", False)


def test_out_of_memory_while_sharing_the_gpu_is_handed_back_to_run_alone() -> None:
    world = World({("m2", INPUTS[0]): ["oom", "ok"]})
    job = make_job()
    result, recorded, _ = supervise(world, job, shared=True)
    assert ("m2", INPUTS[0]) not in recorded and set(recorded) == every_pair(job) - {("m2", INPUTS[0])}
    assert result.alone is not None and result.alone.exclusive
    assert result.alone.work == (("m2", (INPUTS[0],)),) and result.alone.time_original == (INPUTS[0],)

    alone_result, alone_recorded, _ = supervise(world, result.alone, shared=False)
    assert alone_recorded == {("m2", INPUTS[0]): [ok_row("m2", INPUTS[0])]}  # it was the neighbours' memory


def test_out_of_memory_with_the_gpu_to_itself_is_the_variant_s_outcome() -> None:
    world = World({("m2", INPUTS[0]): ["oom"]})
    result, recorded, _ = supervise(world, make_job(), shared=False)
    assert status(recorded, "m2", INPUTS[0]) == ("OOM", False) and result.alone is None


def test_a_job_failing_with_a_dead_context_is_tried_once_more_then_reported() -> None:
    world = World({("m1", INPUTS[0]): ["fail-dead", "ok"]})
    job = make_job()
    result, recorded, _ = supervise(world, job)
    assert result.errors == [] and set(recorded) == every_pair(job)

    world = World({("m1", INPUTS[0]): ["fail-dead"]})
    result, recorded, _ = supervise(world, job)
    assert result.errors == ["/s/1_X.py: RuntimeError: boom"] and world.started >= 2
    assert ("m1", INPUTS[0]) not in recorded  # not recorded: the next run does it again


def test_a_job_failing_out_of_memory_while_sharing_goes_alone_whole() -> None:
    world = World({("m1", INPUTS[0]): ["fail-oom"]})
    job = make_job()
    result, recorded, _ = supervise(world, job, shared=True)
    assert result.errors == [] and result.alone is not None
    left = {(v, k) for v, inputs in result.alone.work for k in inputs}
    assert left | set(recorded) == every_pair(job) and not left & set(recorded)
    assert ("m1", INPUTS[0]) in left and result.alone.exclusive


def test_a_stop_records_nothing_more() -> None:
    world = World({("m1", INPUTS[0]): ["hang"]})
    stop = threading.Event()
    recorded = []
    supervisor = Supervisor(0, lambda v, rows: recorded.append(v), timeout_floor_s=60, stop=stop,
                            start=lambda gpu: ScriptedWorker(world))
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    result = supervisor.run(make_job())
    supervisor.close()
    assert "m1" not in recorded and result.errors == []


@pytest.mark.parametrize("variants", [(ORIGINAL,), MUTANTS])
def test_a_slice_without_the_original_times_it_first_without_recording_it(variants) -> None:
    world, job = World(), make_job(variants=variants, references=())
    _, recorded, _ = supervise(world, job)
    assert set(recorded) == every_pair(job)
    assert world.jobs[0].time_original == (() if ORIGINAL in variants else INPUTS)


def test_a_slice_owing_the_original_some_inputs_times_it_on_the_others_before_any_mutant_runs_there() -> None:
    """A run stopped after the original's rows on the first input owes the original the other inputs only.
    The original is timed on the first input too, so a mutant hanging there gets a deadline scaled by it, not
    the original's own (ten minutes: the stop-and-resume GPU tests ran out of time on it)."""
    world = World({("m1", INPUTS[0]): ["hang"]}, by_input=True)
    job = replace(make_job(references=()), work=((ORIGINAL, INPUTS[1:]), *((v, INPUTS) for v in MUTANTS)))
    stop = threading.Event()
    timer = threading.Timer(10.0, stop.set)  # the original's deadline would hold the hang far longer
    timer.start()
    try:
        result, recorded, _ = supervise(world, job, stop=stop)
    finally:
        timer.cancel()
    assert world.jobs[0].time_original == (INPUTS[0],)
    assert not stop.is_set() and set(recorded) == every_pair(job) and result.errors == []
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False)


def supervise_handing_off(world: World, job: Job, **options) -> tuple[list[SliceResult], dict, list[Job]]:
    """`supervise` with a queue: the jobs a supervisor hands off are run next (by a fresh supervisor, as another
    slot would), until none is left."""
    recorded: dict[tuple[str, str], list[dict]] = {}
    handed: list[Job] = []

    def on_rows(variant: str, rows: list[dict]) -> None:
        key = (variant, rows[0]["input_id"])
        assert key not in recorded, f"{key} recorded twice"
        recorded[key] = rows

    options = {"timeout_factor": 1.0, "timeout_floor_s": 0.3, **options}
    results, queue_ = [], [job]
    while queue_:
        supervisor = Supervisor(0, on_rows, start=lambda gpu: ScriptedWorker(world), hand_off=queue_.append,
                                **options)
        try:
            results.append(supervisor.run(queue_.pop(0)))
        finally:
            supervisor.close()
        handed.extend(queue_)
    return results, recorded, handed


def test_a_variant_that_crashed_is_handed_off_with_its_crashes_and_the_original_s_times() -> None:
    world, job = World({("m2", INPUTS[1]): ["crash"]}), make_job()
    (first, second), recorded, handed = supervise_handing_off(world, job)
    assert set(recorded) == every_pair(job) and first.errors == second.errors == []
    assert first.handed_off == 1 and second.handed_off == 0
    (job_m2,) = handed
    assert job_m2.work == (("m2", (INPUTS[2],)),) and job_m2.faults == (("m2", 1, False, (), ()),)
    assert [key for key, _ in job_m2.original_s] == sorted(INPUTS) and job_m2.record_references == ()
    # the slice went on without m2 in a fresh worker; m2's own job needed no timing of the original
    assert [j.variants() for j in world.jobs] == [[ORIGINAL, *MUTANTS], ["m3"], ["m2"]]
    assert world.jobs[2].time_original == () and world.jobs[2].replay == ()
    assert status(recorded, "m2", INPUTS[2]) == ("Ok", False)


def test_crashes_before_the_hand_off_count_toward_max_crashes_after_it() -> None:
    world = World({("m1", key): ["crash"] for key in INPUTS})
    job = make_job()
    results, recorded, handed = supervise_handing_off(world, job, max_crashes=1)
    assert set(recorded) == every_pair(job)
    # crashed on a in the slice, on b in its own job (2 > 1): c inferred, as without a hand-off
    assert [status(recorded, "m1", k) for k in INPUTS] == [("RuntimeError", False), ("RuntimeError", False),
                                                           ("RuntimeError", True)]
    assert [j.faults for j in handed] == [(("m1", 1, False, (), ()),)]


def test_the_last_variant_left_in_a_slice_is_not_handed_off() -> None:
    world, job = World({("m1", INPUTS[0]): ["crash"]}), make_job(variants=("m1",), references=())
    (result,), recorded, handed = supervise_handing_off(world, job)
    assert set(recorded) == every_pair(job) and handed == [] and result.handed_off == 0


def test_a_hung_variant_handed_off_times_out_on_its_cover_at_once_under_the_shorter_floor() -> None:
    inputs = (*INPUTS, "d/s=3/official")
    world = World({("m3", key): ["hang"] for key in inputs}, by_input=True)  # the others go on after m3's hang
    job = replace(make_job(inputs=inputs, references=()), cover=(inputs[0], inputs[3]))
    (first, second), recorded, handed = supervise_handing_off(world, job, hung_floor_s=0.05)
    assert set(recorded) == every_pair(job)
    assert [status(recorded, "m3", k) for k in inputs] == [("Timeout", False), ("Timeout", True),
                                                           ("Timeout", True), ("Timeout", False)]
    assert [j.faults for j in handed] == [(("m3", 0, True, (inputs[0],), ()),)]
    assert "after it hung on another input" in recorded[("m3", inputs[3])][0]["error_message"]
    # in its own job: one deadline of 0.05 s + the original's time, not 0.3 s, and not run again
    assert second.hangs == 1 and second.seconds["hung"] < 0.25, second.seconds
    assert first.hangs == 2 and first.seconds["hung"] >= 0.59  # its deadline, then waited for to twice it



def test_a_warm_up_job_records_nothing_and_its_failure_is_no_error_but_a_dead_worker_is_replaced() -> None:
    """A warm-up job (Job.warm) reports its seconds and records no row; where its worker fails (the job's own
    slices will meet that failure and report it) nothing is an error, and a worker whose context died goes."""
    world = World(warm_s=0.05)
    job = replace(make_job(), work=(), record_references=(), warm=True)
    result, recorded, supervisor = supervise(world, job)
    assert recorded == {} and result.errors == [] and result.seconds["references"] == 0.05
    assert supervisor.restarts == 0 and result.pairs == 0

    class Failing(ScriptedWorker):
        def _warm(self, job: Job) -> None:
            self.outbox.put(Failed("RuntimeError: get_inputs failed", context_alive=self.serial > 1))
            if self.serial == 1:
                self._die(3)

    world = World()
    supervisor = Supervisor(0, lambda variant, rows: pytest.fail("recorded"), start=lambda gpu: Failing(world))
    try:
        assert supervisor.run(job).errors == [] and supervisor.restarts == 1  # the dead context: replaced
        assert supervisor.run(job).errors == [] and supervisor.restarts == 1  # alive: kept
    finally:
        supervisor.close()


def test_a_pair_the_whole_gpu_stalled_through_gets_the_stall_added_to_its_deadline_and_a_hang_still_ends() -> None:
    """With a stall watch, a pair past its deadline only because the whole GPU stalled meanwhile (stalls.py; here
    the first 2 s of each run) is waited for the stall's length more and recorded as it ends; with no stall the
    same pair is a Timeout at its deadline (the watch measures what the wait to twice it was there to absorb); a
    hang still times out, later by the stall."""
    import time

    job = make_job(variants=(ORIGINAL, "m1"), inputs=INPUTS[:1], references=())
    options = {"timeout_floor_s": 1.0}  # a 1 s deadline: the slow pair (SLOW_S) is past it, within twice it
    result, recorded, _ = supervise(World({("m1", INPUTS[0]): ["slow"]}), job, stalled=lambda: 0.0, **options)
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False) and result.hangs == 1

    began = time.monotonic()
    result, recorded, _ = supervise(World({("m1", INPUTS[0]): ["slow"]}), job,
                                    stalled=lambda: min(time.monotonic() - began, 2.0), **options)
    assert status(recorded, "m1", INPUTS[0]) == ("Ok", False) and result.hangs == 0

    began = time.monotonic()
    result, recorded, _ = supervise(World({("m1", INPUTS[0]): ["hang"]}), job,
                                    stalled=lambda: min(time.monotonic() - began, 2.0), **options)
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False) and result.hangs == 1  # its kill, no wait
    assert 2 * 1.0 - 0.1 <= result.seconds["hung"] < 2 * 1.0 + 0.5  # its deadline, then the stall (capped at it)
    assert "waited for" not in recorded[("m1", INPUTS[0])][0]["error_message"]


def test_a_stall_lengthens_a_deadline_by_at_most_its_length_and_not_that_of_a_variant_that_failed_before() -> None:
    """A fault's kernel can stop the whole GPU until its worker is killed: under a stall that never ends a hang is
    still killed, at twice its deadline; a variant that crashed before gets no more time than its deadline, so a
    stall it causes itself ends with it."""
    import time

    began = time.monotonic()
    endless = {"stalled": lambda: time.monotonic() - began}
    job = make_job(variants=(ORIGINAL, "m1"), inputs=INPUTS[:1], references=())
    result, recorded, _ = supervise(World({("m1", INPUTS[0]): ["hang"]}), job, **endless)
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False)
    assert 2 * 0.3 - 0.05 <= result.seconds["hung"] < 2 * 0.3 + 0.5

    crashed_before = replace(job, faults=(("m1", 1, False, (), ()),))
    result, recorded, _ = supervise(World({("m1", INPUTS[0]): ["hang"]}), crashed_before, **endless)
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False)
    assert 0.3 - 0.05 <= result.seconds["hung"] < 0.3 + 0.25


def test_a_stall_while_another_worker_of_the_gpu_is_killed_lengthens_a_deadline_by_the_kill_s_seconds_too() -> None:
    """While the driver tears another worker down the whole GPU can stand still for longer than a pair's deadline:
    under a stall that never ends, a pair taking SLOW_S is a Timeout at twice its 0.5 s deadline when no other
    worker is killed meanwhile, and recorded as it ends while one is (its kill in flight for 2 s); a hang beside
    that kill is still killed, later by the kill's seconds."""
    import time

    from oracleaudit.execution.stalls import Teardowns

    job = make_job(variants=(ORIGINAL, "m1"), inputs=INPUTS[:1], references=())

    def beside_a_kill(action: str) -> tuple[SliceResult, dict]:
        teardowns, began = Teardowns(), time.monotonic()
        killing = threading.Event()

        def other_slot() -> None:
            with teardowns.during():
                killing.set()
                time.sleep(2.0)

        threading.Thread(target=other_slot, daemon=True).start()
        killing.wait()
        result, recorded, _ = supervise(World({("m1", INPUTS[0]): [action]}), job, timeout_floor_s=0.5,
                                        stalled=lambda: time.monotonic() - began, teardowns=teardowns)
        return result, recorded

    began = time.monotonic()
    result, recorded, _ = supervise(World({("m1", INPUTS[0]): ["slow"]}), job, timeout_floor_s=0.5,
                                    stalled=lambda: time.monotonic() - began)
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False) and result.hangs == 1

    result, recorded = beside_a_kill("slow")
    assert status(recorded, "m1", INPUTS[0]) == ("Ok", False) and result.hangs == 0

    result, recorded = beside_a_kill("hang")
    assert status(recorded, "m1", INPUTS[0]) == ("Timeout", False) and result.hangs == 1
    assert 2 * 0.5 + 1.5 <= result.seconds["hung"] < 2 * 0.5 + 2.0 + 0.6
