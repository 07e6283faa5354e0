"""After a variant's crash or hang the supervisor leaves out the inputs whose every drawing oracle has seen it fail
(ledger.py), on the CPU with the scripted worker of test_supervisor.py; and the catalog oracles' deciders."""

from __future__ import annotations

from dataclasses import replace

from oracleaudit.execution.ledger import Ledger
from oracleaudit.execution.protocol import ORIGINAL
from tests.execution.test_supervisor import INPUTS, World, every_pair, make_job, status, supervise, supervise_handing_off

A, B, C = INPUTS
D = "d/s=3/official"
# oracle 0 draws a and b, oracle 1 draws b and c (both fail on a crash or a hang there); nothing draws d
DECIDERS = ((A, (0,), (0,), (0,)), (B, (0, 1), (0, 1), (0, 1)), (C, (1,), (1,), (1,)), (D, (), (), ()))


def deciding_job(variants=(ORIGINAL, "m1", "m2"), cover=()):
    return replace(make_job(variants=variants, inputs=(*INPUTS, D), references=()), deciders=DECIDERS, cover=cover)


def test_a_crash_leaves_out_the_inputs_only_oracles_that_saw_it_fail_draw_and_keeps_the_others() -> None:
    world, job = World({("m1", A): ["crash"]}), deciding_job()
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    # a: the crash (oracle 0 saw it); b is drawn by oracle 1 too and c by oracle 1 only: observed; d, drawn by
    # no oracle of the run, observed too
    assert [status(recorded, "m1", k) for k in (A, B, C, D)] == [("RuntimeError", False)] + [("Ok", False)] * 3
    assert supervisor.restarts == 1 and result.crashes == 1


def test_once_every_oracle_saw_the_variant_fail_only_inputs_no_oracle_draws_are_run() -> None:
    world, job = World({("m1", k): ["crash"] for k in (A, B, C, D)}), deciding_job(cover=(A, C))
    result, recorded, supervisor = supervise(world, job, max_crashes=0)
    assert set(recorded) == every_pair(job) and result.errors == []
    # a crashes (oracle 0); b and c would each fail oracle 1: c, a cover input, runs first (Ledger.deciding_order)
    # and crashes, so b is decided and not run; d is run
    assert [status(recorded, "m1", k) for k in (A, B, C, D)] == [("RuntimeError", False), ("RuntimeError", True),
                                                                 ("RuntimeError", False), ("RuntimeError", False)]
    assert recorded[("m1", B)][0]["error_class"] == "NotRun"
    assert "every oracle that draws this input saw the variant fail already (it crashed on c/s=2/odd)" \
        in recorded[("m1", B)][0]["error_message"]
    assert supervisor.restarts == 3 and result.crashes == 3  # one crash fewer than without the deciders
    assert world.attempts.get(("m1", B)) is None


def test_a_hang_on_an_input_both_oracles_draw_leaves_out_the_cover_inputs_after_it() -> None:
    world, job = World({("m2", k): ["hang"] for k in INPUTS}, by_input=True), deciding_job(cover=(A, C))
    result, recorded, supervisor = supervise(world, job, hung_floor_s=0.05)
    assert set(recorded) == every_pair(job)
    # m2 hangs on a (oracle 0 saw it); b, not a cover input, is inferred after the hang as before; c, a cover
    # input of oracle 1, is still observed: a Timeout
    assert [status(recorded, "m2", k)[0] for k in (A, B, C)] == ["Timeout"] * 3
    assert [status(recorded, "m2", k)[1] for k in (A, B, C)] == [False, True, False]
    assert status(recorded, "m2", D) == ("Timeout", True)  # inferred after the hang, as before (not cover)


def test_the_oracles_that_saw_a_handed_off_variant_fail_travel_with_it() -> None:
    world = World({("m1", k): ["crash"] for k in (A, B, C, D)})
    job = deciding_job(variants=(ORIGINAL, "m1", "m2"), cover=(A, C))
    results, recorded, handed = supervise_handing_off(world, job, max_crashes=0)
    assert set(recorded) == every_pair(job)
    assert handed[0].faults == (("m1", 1, False, (), (0,)),)
    # decided in the handed-off job after c's crash (c, of the cover, first: Ledger.deciding_order)
    assert status(recorded, "m1", B) == ("RuntimeError", True) and status(recorded, "m1", C) == ("RuntimeError", False)


def test_the_ledger_takes_decided_inputs_out_of_the_work_and_nothing_without_deciders() -> None:
    ledger = Ledger(deciding_job())
    ledger.take("m1", A)  # the crashed pair's row is recorded first
    assert ledger.fail("m1", A, "RuntimeError") == []  # oracle 0 only: b is drawn by oracle 1 as well
    assert ledger.fail("m1", C, "RuntimeError") == [B, C]  # c not recorded yet: both decided now
    assert ledger.work["m1"] == [D] and ledger.failed_by["m1"] == {0, 1}
    plain = Ledger(make_job())
    assert plain.fail("m1", A, "RuntimeError") == [] and plain.work["m1"] == list(INPUTS)


# oracle 0 draws a and b, oracle 1 draws d and c, oracle 2 c only; the job's order is a, b, d, c
ORDERED = (A, B, D, C)
SPREAD = ((A, (0,), (0,), (0,)), (B, (0,), (0,), (0,)), (D, (1,), (1,), (1,)), (C, (1, 2), (1, 2), (1, 2)))


def test_a_crashed_variant_alone_runs_first_the_input_that_decides_the_others_soonest() -> None:
    """After m1's crash on a (oracle 0 saw it), b is decided; d (oracle 1) comes before c (oracles 1 and 2) in
    the job's order, but a crash on c decides d as well: c runs first, and m1 crashes twice instead of three
    times."""
    world = World({("m1", k): ["crash"] for k in ORDERED})
    job = replace(make_job(variants=(ORIGINAL, "m1"), inputs=ORDERED, references=()), deciders=SPREAD)
    result, recorded, supervisor = supervise(world, job)
    assert set(recorded) == every_pair(job) and result.errors == []
    assert [status(recorded, "m1", k) for k in ORDERED] == [("RuntimeError", False), ("RuntimeError", True),
                                                            ("RuntimeError", True), ("RuntimeError", False)]
    assert world.attempts.get(("m1", D)) is None and supervisor.restarts == 2
    assert [sent.first for sent in world.jobs] == [(), (C,)]


def test_the_deciding_order_follows_the_fault_the_oracles_fail_on_and_is_empty_before_any_fault() -> None:
    # oracle 1 fails d on a crash only, oracle 2 fails c on a hang only
    deciders = ((A, (0,), (0,), (0,)), (B, (0,), (0,), (0,)), (D, (1,), (1,), ()), (C, (1, 2), (1,), (2,)))
    ledger = Ledger(replace(make_job(variants=(ORIGINAL, "m1", "m2"), inputs=ORDERED, references=()),
                            deciders=deciders, cover=(D,)))
    assert ledger.deciding_order("m1") == ()  # no fault yet: the job's order
    ledger.crashes["m1"] += 1
    ledger.take("m1", A)
    ledger.fail("m1", A, "RuntimeError")
    # a crash on d or c fails oracle 1 only (oracle 2 never fails on one): d, the cover input, first; then nothing
    # takes in oracle 2
    assert ledger.deciding_order("m1") == (D,)
    ledger.hung.add("m2")
    ledger.take("m2", A)
    ledger.fail("m2", A, "Timeout")
    assert ledger.deciding_order("m2") == (C,)  # a hang on c fails oracle 2; a hang on no input fails oracle 1


def test_the_catalog_oracles_deciders_name_who_draws_each_default_pool_input() -> None:
    from oracleaudit.pool import Pool
    from oracleaudit.problem import bundled_root, problem_at
    from oracleaudit.scoring.oracle import catalog, covering

    problem = problem_at(bundled_root() / "level1" / "1_ReLU.py")
    keys = [e.key for e in Pool.load("default").entries_for(problem)]
    cover = covering()
    deciders = {key: rest for key, *rest in cover.deciders(problem.label, keys)}
    names = list(catalog())
    kernelbench = names.index("kernelbench")
    assert set(deciders) == set(keys)
    drawn = [key for key, (draws, _, _) in deciders.items() if kernelbench in draws]
    assert len(drawn) == 5  # KernelBench's five trial seeds
    for key, (draws, crash, hang) in deciders.items():
        assert set(crash) <= set(draws) and set(hang) <= set(draws)
    # every oracle draws at least one input of the problem, and each cover input is drawn by some oracle
    assert set().union(*(set(d) for d, _, _ in deciders.values())) == set(range(len(names)))
    assert all(deciders[k][0] for k in cover(problem.label, keys))
