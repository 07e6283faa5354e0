"""The worker's host-side pieces that need no GPU: fresh models from templates (on the device or kept on the
host), the stray-write checksums and the poison, the helpers over nested outputs, and a pool input with its
references made once and then read from the cache (on the CPU, for a real bundled problem)."""

from __future__ import annotations

import threading
import types
from collections import OrderedDict
from types import SimpleNamespace

import pytest
import torch

from oracleaudit.execution import guard, phases, worker
from oracleaudit.execution.entries import HostEntry, pins
from oracleaudit.execution.models import PINNED_ENV, ModelTemplates
from oracleaudit.kernelbench import WEIGHT_SEED

EXTENSION = types.ModuleType("fake_extension")  # stands in for a compiled extension (a module object)


class Net(torch.nn.Module):
    """A model like a solution's ModelNew: random weights, an extension reference, a buffer, Python state."""

    constructed = 0

    def __init__(self, width: int):
        super().__init__()
        type(self).constructed += 1
        self.fc = torch.nn.Linear(width, width)
        self.register_buffer("calls", torch.zeros(1))
        self.ext = EXTENSION
        self.history: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1  # state changed by a forward must not reach the next input's model
        self.history.append(1)
        return self.fc(x) + torch.rand(1)  # draws from the RNG the constructor left


class Unpicklable(Net):
    def __init__(self, width: int):
        super().__init__(width)
        self.lock = threading.Lock()  # deepcopy fails on it


def case(width: int) -> SimpleNamespace:
    """One input of a shape group: the group's key and init args, and the input."""
    return SimpleNamespace(key=("width", width), init=[width], inputs=[torch.ones(2, width)])


def run_fresh(model: torch.nn.Module, c) -> torch.Tensor:
    with torch.no_grad():
        return model(*c.inputs)


def constructed_the_kernelbench_way(model_class, c) -> torch.Tensor:
    torch.manual_seed(WEIGHT_SEED)
    return run_fresh(model_class(*c.init).eval(), c)


@pytest.mark.parametrize("on_host", [False, True])
def test_a_model_from_a_template_behaves_as_a_fresh_construction_and_shares_the_extension(on_host: bool) -> None:
    templates = ModelTemplates(Net, "cpu", on_host=on_host)
    Net.constructed = 0
    cases = [case(8), case(8), case(8), case(16), case(16)]
    models = [templates.fresh(c.key, c.init) for c in cases[:1]]
    outputs = [run_fresh(models[0], cases[0])]
    for c in cases[1:]:
        model = templates.fresh(c.key, c.init)
        models.append(model)
        outputs.append(run_fresh(model, c))
    assert Net.constructed == 2  # once per width; the other inputs get copies of the template
    for c, out in zip(cases, outputs):
        assert torch.equal(out, constructed_the_kernelbench_way(Net, c))
    assert all(m.ext is EXTENSION for m in models)
    assert all(m.calls.item() == 1 and m.history == [1] for m in models)
    assert models[1].fc.weight.data_ptr() != models[2].fc.weight.data_ptr()


class Tied(Net):
    def __init__(self, width: int):
        super().__init__(width)
        self.head = torch.nn.Linear(width, width)
        self.head.weight = self.fc.weight  # one parameter held by two modules


def test_a_copy_from_a_template_on_the_host_is_its_own_and_keeps_tied_weights_tied() -> None:
    """On the host the template's tensors are copied straight to the device: the copy shares no storage with the
    template (a forward's in-place update leaves the template as constructed) and tied weights stay one."""
    templates = ModelTemplates(Tied, "cpu", on_host=True)
    c = case(8)
    first = templates.fresh(c.key, c.init)
    copy = templates.fresh(c.key, c.init)
    run_fresh(copy, c)
    template = templates.templates[c.key][0]
    assert template.calls.item() == 0 and copy.calls.item() == 1
    assert copy.head.weight is copy.fc.weight and isinstance(copy.fc.weight, torch.nn.Parameter)
    assert copy.fc.weight.data_ptr() not in (template.fc.weight.data_ptr(), first.fc.weight.data_ptr())
    assert torch.equal(copy.fc.weight, template.fc.weight) and copy.fc.weight.requires_grad


def test_a_model_that_cannot_be_copied_is_constructed_for_every_input() -> None:
    templates = ModelTemplates(Unpicklable, "cpu")
    Unpicklable.constructed = 0
    cases = [case(4), case(4), case(4)]
    outputs = [run_fresh(templates.fresh(c.key, c.init), c) for c in cases]
    assert Unpicklable.constructed == 3
    for c, out in zip(cases, outputs):
        assert torch.equal(out, constructed_the_kernelbench_way(Unpicklable, c))


def test_the_templates_bytes_are_their_parameters_and_buffers_counted_once_each() -> None:
    templates = ModelTemplates(Tied, "cpu", on_host=True)
    assert templates.bytes() == 0
    for c in (case(8), case(8), case(16)):
        templates.fresh(c.key, c.init)
    # Linear(w, w) twice with one weight tied, its two biases, the `calls` buffer; float32
    assert templates.bytes() == sum(4 * (w * w + 2 * w + 1) for w in (8, 16))
    Unpicklable.constructed = 0
    uncopied = ModelTemplates(Unpicklable, "cpu")
    uncopied.fresh(case(4).key, case(4).init)
    assert uncopied.bytes() == 0  # no template kept: constructed for every input


def test_poison_is_pytorch_s_fill_for_uninitialised_memory_in_every_dtype() -> None:
    items = [torch.zeros(3), torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.int32),
             torch.zeros(2, dtype=torch.uint8), torch.zeros(2, dtype=torch.bool), torch.zeros(0), "not a tensor"]
    guard.poison(items)
    assert items[0].isnan().all() and items[1].isnan().all()
    assert items[2].tolist() == [2**31 - 1] * 2 and items[3].tolist() == [255, 255] and items[4].all()


def test_checksums_see_a_changed_byte_in_an_input_or_a_reference() -> None:
    ref = torch.arange(6, dtype=torch.float32)
    items = [torch.ones(3), ref, ref.double(), torch.zeros(3, dtype=torch.uint8)]  # the last: not whole words
    before = guard.checksums(items)
    assert torch.equal(before, guard.checksums(items)) and len(before) == 4
    items[0][2] += 1
    assert not torch.equal(before, guard.checksums(items))
    items[0][2] -= 1
    assert torch.equal(before, guard.checksums(items))
    items[2][0] = -0.0  # the same value as 0.0, other bits
    assert not torch.equal(before, guard.checksums(items))
    items[2][0] = 0.0
    items[3][1] = 7
    assert not torch.equal(before, guard.checksums(items))


def job_run(model: torch.nn.Module) -> worker.JobRun:
    """A JobRun's state as `_by_input` reads it (the rest of a job needs a GPU)."""
    run = object.__new__(worker.JobRun)
    run.ref_model = model
    return run


def test_a_stray_write_into_the_fp64_model_is_seen_like_one_into_the_fp32_model() -> None:
    """The fp64 copy of the Model computes the references of the inputs that follow: a variant's stray write
    into its weights must make the worker remake it, as one into the fp32 Model's or a reference does."""
    run = job_run(torch.nn.Linear(4, 4))
    run.init, run.model64 = [], None
    gpu = SimpleNamespace(inputs=[torch.ones(2, 4)], ref32=[torch.zeros(2, 4)], ref64=[torch.zeros(2, 4).double()])
    gpu.sums = run._sums(gpu)
    assert not run._changed(gpu).item()
    run.model64 = torch.nn.Linear(4, 4).double()  # made for the next input's references: a new entry's sums
    gpu.sums = run._sums(gpu)
    made = run.model64.weight.detach().clone()
    with torch.no_grad():
        run.model64.weight[1, 2] += 1e-3
    assert run._changed(gpu).item()
    with torch.no_grad():
        run.model64.weight.copy_(made)
    assert not run._changed(gpu).item()
    with torch.no_grad():
        run.ref_model.bias[0] = 7.0
    assert run._changed(gpu).item()


def test_pairs_go_input_by_input_unless_an_input_is_smaller_than_the_weights() -> None:
    """Copying an input and its references to the GPU for every pair cost most of a pair's device time: the
    pairs go input by input (the entry copied once for every variant, each variant's template copied per
    pair from the host) unless the Model's weights, which each template holds, outweigh the entry."""
    weightless, weighted = torch.nn.ReLU(), torch.nn.Linear(1024, 1024)  # 0 and 4,198,400 bytes
    assert job_run(weightless)._by_input(entry_bytes=64, inputs=69)
    assert not job_run(weighted)._by_input(entry_bytes=1 << 20, inputs=69)
    assert job_run(weighted)._by_input(entry_bytes=8 << 20, inputs=69)
    # the group's inputs would not stay on the host: input by input, whatever the weights
    assert job_run(weighted)._by_input(entry_bytes=1 << 20, inputs=5000)


def test_the_order_of_before_can_be_asked_for_to_compare_them(monkeypatch) -> None:
    monkeypatch.setenv(worker.ORDER_ENV, "variant")
    assert not job_run(torch.nn.ReLU())._by_input(entry_bytes=64, inputs=69)
    assert job_run(torch.nn.ReLU())._by_input(entry_bytes=1 << 30, inputs=69)


def cpu_run(problem, cache_root) -> worker.JobRun:
    """A JobRun on the CPU at the point of a shape group's first input: its module and fp32 Model made."""
    from oracleaudit.execution.references import ReferenceCache
    from oracleaudit.files import file_sha256

    run = object.__new__(worker.JobRun)
    run.device, run.device_name, run.clock, run.modes = "cpu", "cpu", phases.PhaseClock(), {}
    run.cache, run.host, run.model64 = ReferenceCache(cache_root), OrderedDict(), None
    run.problem, run.problem_sha = problem, file_sha256(problem.path)
    return run


def test_an_input_and_its_references_are_made_once_then_read_from_the_cache(tmp_path, monkeypatch) -> None:
    """A slice (or a fresh worker after a crash) that runs on an input another made before reads the input
    with its references: bit for bit what making it gives, and made no more."""
    from pathlib import Path

    from oracleaudit.pool import Pool, PoolEntry
    from oracleaudit.problem import problem_at

    problem = problem_at(Path(__file__).parents[2] / "datasets" / "oakb" / "level1" / "23_Softmax.py")
    entries = Pool.load("default").entries_for(problem)[:3]
    made = []
    make = PoolEntry.make_inputs
    monkeypatch.setattr(PoolEntry, "make_inputs", lambda self, *a: made.append(self.key) or make(self, *a))
    hosts = []
    for _ in range(2):
        run = cpu_run(problem, tmp_path)
        for entry in entries:
            run.module = entry.load_problem(problem)
            run.weight_seed = entry.weight_seed
            run._make_reference_model()
            hosts.append(run._host_entry(entry))
    assert made == [e.key for e in entries]  # the second run made none
    for first, second in zip(hosts[:3], hosts[3:]):
        want = make(first.entry, entry.load_problem(problem))
        for a, b in ((first.inputs, want), (second.inputs, want), (second.ref32, first.ref32),
                     (second.ref64, first.ref64)):
            assert len(a) == len(b) and all(x.dtype == y.dtype and x.stride() == y.stride()
                                            and torch.equal(x.view(torch.uint8), y.view(torch.uint8))
                                            for x, y in zip(a, b))


def entry_run(pinned_budget_left: bool = True) -> tuple[worker.JobRun, HostEntry]:
    """A JobRun variant by variant on the GPU with one host entry (nested inputs with a non-tensor among them)."""
    run = job_run(torch.nn.Linear(4, 4).cuda())
    run.device, run.clock, run.init, run.model64, run.gpu = "cuda:0", phases.PhaseClock(), [], None, None
    run.pending_references = set()
    host = HostEntry(SimpleNamespace(key="k"), [torch.randn(3, 5), (torch.arange(6).reshape(2, 3).t(), 7)],
                     [torch.randn(4)], [torch.randn(4).double()])
    run.host = OrderedDict(k=host)
    run.on_host = False
    run.pin_entries = pins(run.device, False)
    return run, host


@pytest.mark.gpu
@pytest.mark.parametrize("pinned", [True, False])
def test_variant_by_variant_an_entry_is_pinned_once_and_reaches_the_gpu_unchanged(monkeypatch, pinned) -> None:
    """Each pair copies its entry to the GPU: from pinned memory (asynchronously), unless the benchmark switch
    asks for pageable memory; the copies are the same tensors either way, strides included."""
    if not pinned:
        monkeypatch.setenv(PINNED_ENV, "0")
    run, host = entry_run()
    before = [t.clone() for t in (*worker.tensors(host.inputs), *host.ref32, *host.ref64)]
    first = run._gpu_entry(host.entry)
    kept = [t.data_ptr() for t in worker.tensors(host.inputs)]
    run.gpu = None
    second = run._gpu_entry(host.entry)  # the next pair's copy: the entry is pinned once
    assert host.pinned is pinned
    assert [t.data_ptr() for t in worker.tensors(host.inputs)] == kept
    for gpu in (first, second):
        on_gpu = [*worker.tensors(gpu.inputs), *gpu.ref32, *gpu.ref64]
        assert all(t.is_cuda for t in on_gpu)
        assert all(torch.equal(a.cpu(), b) and a.stride() == b.stride() for a, b in zip(on_gpu, before))
        assert gpu.inputs[1][1] == 7
    mine = [*worker.tensors(host.inputs), *host.ref32, *host.ref64]
    assert all(t.is_pinned() is pinned for t in mine)


@pytest.mark.gpu
def test_entries_over_the_pinned_budget_stay_in_pageable_memory(monkeypatch) -> None:
    monkeypatch.setattr(worker, "PINNED_BUDGET_BYTES", 64)
    run, host = entry_run()
    gpu = run._gpu_entry(host.entry)
    assert not host.pinned and not any(t.is_pinned() for t in worker.tensors(host.inputs))
    assert torch.equal(gpu.ref64[0].cpu(), host.ref64[0])


@pytest.mark.gpu
@pytest.mark.parametrize("setting", [None, "variant"])
def test_input_by_input_an_entry_is_pinned_and_those_pinned_before_leave_the_host(monkeypatch, setting) -> None:
    """Input by input an entry goes to the GPU once a group: from pinned memory, unless the benchmark switch
    keeps the policy before (pageable); the entries pinned before it leave the host, so the pinned budget
    holds the entry in use, not those done with."""
    if setting is not None:
        monkeypatch.setenv(PINNED_ENV, setting)
    run, first = entry_run()
    run.on_host = True
    run.pin_entries = pins(run.device, True)
    second = HostEntry(SimpleNamespace(key="m"), [torch.randn(3, 5)], [torch.randn(4)], [torch.randn(4).double()])
    run.host["m"] = second
    run._gpu_entry(first.entry)
    gpu = run._gpu_entry(second.entry)
    pinned = setting is None
    assert first.pinned is pinned and second.pinned is pinned
    assert list(run.host) == (["m"] if pinned else ["k", "m"])
    assert torch.equal(gpu.inputs[0].cpu(), second.inputs[0]) and torch.equal(gpu.ref64[0].cpu(), second.ref64[0])


def test_the_phase_clock_hands_out_each_second_once_and_nothing_while_a_phase_runs(monkeypatch) -> None:
    now = [100.0]
    monkeypatch.setattr(phases, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    clock = phases.PhaseClock()
    with clock("load"):
        now[0] += 2.0
    now[0] += 0.5  # outside any phase: other
    with clock("execution"):
        now[0] += 1.0
        assert clock.take() == {}  # a phase is running: its time goes with the next take
        now[0] += 1.0
    assert clock.take() == {"load": 2.0, "execution": 2.0, "other": 0.5}
    assert clock.take() == {"other": 0.0}
    with clock.instead("replay"):  # a replay's phases count as replay
        now[0] += 0.25
        with clock("execution"):
            now[0] += 3.0
    with clock("evidence"):
        now[0] += 1.5
    assert clock.take() == {"replay": 3.25, "evidence": 1.5, "other": 0.0}


def warm_run(problem, cache_root, entries, sent: list) -> worker.JobRun:
    """A warm-up job (`Job.warm`) of `entries` in a JobRun on the CPU, its messages into `sent`."""
    from oracleaudit.execution.protocol import Job

    run = cpu_run(problem, cache_root)
    run.job = Job(solution="", problem_path=str(problem.path), problem=problem.label, mutants=(), pool="default",
                  entry_keys=tuple((e.key, 0, e.shape, "d") for e in entries), build_dir="", warm=True)
    run.send = sent.append
    return run


def test_a_warm_up_job_fills_the_cache_so_a_slice_makes_no_input_and_stops_where_the_cache_refuses(
        tmp_path, monkeypatch) -> None:
    """While the builds run, a warm-up job makes each input and its references into the cache (Built, then
    Done with the references' seconds); a slice then makes none, a second warm-up job neither; where the cache
    takes no references (too large), the job stops after the first input rather than make what is dropped."""
    from pathlib import Path

    from oracleaudit.execution import references
    from oracleaudit.execution.protocol import Built, Done
    from oracleaudit.pool import Pool, PoolEntry
    from oracleaudit.problem import problem_at

    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda device=None: 0)
    problem = problem_at(Path(__file__).parents[2] / "datasets" / "oakb" / "level1" / "23_Softmax.py")
    entries = Pool.load("default").entries_for(problem)[:3]
    made = []
    make = PoolEntry.make_inputs
    monkeypatch.setattr(PoolEntry, "make_inputs", lambda self, *a: made.append(self.key) or make(self, *a))
    sent: list = []
    warm_run(problem, tmp_path, entries, sent)._warm()
    assert [type(m) for m in sent] == [Built, Done] and sent[1].seconds["references"] > 0
    assert made == [e.key for e in entries] and len(list(tmp_path.glob("*.bin"))) == 3
    warm_run(problem, tmp_path, entries, sent)._warm()  # everything cached: nothing made
    run = cpu_run(problem, tmp_path)
    for entry in entries:
        run.module, run.weight_seed = entry.load_problem(problem), entry.weight_seed
        run._make_reference_model()
        run._host_entry(entry)
    assert made == [e.key for e in entries]

    monkeypatch.setattr(references, "MAX_CACHED_BYTES", 1)
    warm_run(problem, tmp_path / "small", entries, sent)._warm()
    assert made[3:] == [entries[0].key] and not list((tmp_path / "small").glob("*.bin"))
