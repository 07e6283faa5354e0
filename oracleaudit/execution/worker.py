"""The GPU worker: a subprocess bound to one GPU that loads a solution's built variants and observes each
(variant, pool input) pair of a job, sending one message per pair (protocol.py).

Memory: the GPU holds one input's working set — the problem's fp32 Model (the reference runs between the two
kernel runs), the variant's model, one input, its outputs and its two references — never growing with the pool.
An input and its references come from the reference cache (references.py) or are made once (the references with
one fp64 copy of the Model per run of a shape group); the worker keeps on the host, within `HOST_BUDGET_BYTES`,
those it will need again.

Order: the pool inputs are taken in runs of one shape group (entries with the same shape overrides share the
init args, the Model and the templates; each variant's ModelNew is constructed once per run and deep-copied per
input, KernelBench's way of building it): the first input of every group, then the rest of each group
(`plan.input_runs`: a variant that crashes on a shape crashes there early, when a crash costs few replays).
Within a run the pairs run input by input — the input and its references go to the GPU once for every variant,
and every variant's template is kept on the host, out of reach of another variant's stray writes — unless an
input's working set is smaller than the Model's weights and the group's inputs fit in host memory; then variant
by variant, one template at a time on the GPU, each pair copying its input and references to the GPU. In either
order an entry goes to the GPU from pinned memory (within `PINNED_BUDGET_BYTES`; a copy from pageable memory waits
for everything the worker queued, and input by input it once took a third of a pair's device time). The original
runs first on every input, so the supervisor knows its time before any mutant's deadline.
A fresh worker that continues a slice first runs again, unrecorded and in their place in that order, the pairs
of `Job.replay` (inputs recorded in a process that died for another variant's fault): a variant's state across
inputs does not depend on its neighbours in the slice.

Each pair: fresh GPU copies of the input (and of the model, from its template, with the RNG states the
constructor left), then kernel → reference → kernel (a stale buffer shows in the second run; what the first
run's output buffers held before is poison: guard.py), then the evidence against both references. Stray
writes: the references on the GPU, the pristine input and the Model's weights are checksummed after every
pair; if a mutant's stray write reached them, they are made again from the host copies and the pair is
measured again.

A sticky CUDA error (a dead context) ends the process after the pair's rows and a `Fatal`; the supervisor goes
on in a fresh worker. An out-of-memory error is the pair's row (OOM); the supervisor decides if it reproduces.
A warm-up job (`Job.warm`) only fills the reference cache, while the job's extensions are still building.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from oracleaudit.execution.entries import GpuEntry, HostEntry, pins
from oracleaudit.execution.guard import bits, checksums, poison_blocks
from oracleaudit.execution.models import ModelTemplates, entry_init
from oracleaudit.execution.observation import context_alive, first_line, is_out_of_memory, row, status_of
from oracleaudit.execution.phases import PhaseClock, profiled
from oracleaudit.execution.plan import input_runs
from oracleaudit.execution.protocol import Built, Done, Failed, Fatal, Job, Memory, Ready, Rows, Started
from oracleaudit.execution.trace import mark
from oracleaudit.status import ORIGINAL, REFERENCE, Status
from oracleaudit.tensors import map_tensors, tensor_bytes, tensors, to_double

HOST_BUDGET_BYTES = 4 << 30  # a worker's host copies of one group's inputs and references
PINNED_BUDGET_BYTES = 1 << 30  # of those, the most kept in pinned memory
TEMPLATE_BUDGET_BYTES = 4 << 30  # input by input: every variant's template model, on the host
ORDER_ENV = "ORACLEAUDIT_PAIR_ORDER"  # "variant": the order before input by input was chosen by bytes (benchmarks)


class JobRun:
    """One job in this process: build, then every (variant, input) pair of its work."""

    def __init__(self, job: Job, send: Callable[[Any], None]):
        import torch

        from oracleaudit.execution.references import ReferenceCache

        self.job = job
        self.send = send
        self.device = job.device
        self.clock = PhaseClock()
        self.cache = ReferenceCache()
        self.device_name = torch.cuda.get_device_name(torch.device(self.device))
        self.modes: dict[str, dict[str, Any]] = {}  # an entry's math mode → the flags its rows record
        self.todo: dict[str, set[str]] = {variant: set(inputs) for variant, inputs in job.work}
        self.replay: dict[str, set[str]] = {variant: set(inputs) for variant, inputs in job.replay
                                            if variant in self.todo}
        self.solutions: dict[str, Any] = {}  # variant key → loaded solution module, or the exception
        self.peak_sent: int | None = None  # the peak GPU memory told the supervisor (its lease), once sent
        self.on_host = False  # templates on the host (input-by-input order)

    # ---- the job ---------------------------------------------------------------------------------------

    def run(self) -> None:
        import torch

        from oracleaudit.execution import build as builds
        from oracleaudit.files import file_sha256
        from oracleaudit.mutant import Mutant
        from oracleaudit.pool import Pool
        from oracleaudit.problem import problem_at

        job = self.job
        torch.cuda.reset_peak_memory_stats(self.device)
        if job.warm:
            return self._warm()
        unbuildable = dict(job.unbuildable)
        with self.clock("load"):
            mutants = [Mutant(**m) for m in job.mutants if m["id"] not in unbuildable]
            self.plan, self.built, dropped = builds.build_isolating(Path(job.solution), mutants, Path(job.build_dir))
        unbuildable.update(dropped)
        mark("built")
        self.send(Built(self.clock.take().get("load", 0.0)))  # the supervisor counts it as build_load
        self.problem = problem_at(job.problem_path)
        self.problem_sha = file_sha256(self.problem.path)
        entries = self._entries(Pool.load(job.pool))
        for key, message in unbuildable.items():
            for input_key in sorted(self.todo.pop(key, ())):
                self.send(Started(key, input_key))
                self.send(Rows(key, input_key, (row(key, job.problem, job.entry(input_key), 0, Status.BUILD_ERROR,
                                                    "BuildError", message, None, None,
                                                    self.mode(entries[input_key]), None, None),)))
        if job.time_original:  # run first on these inputs, not recorded: the supervisor times it
            self.todo.setdefault(ORIGINAL, set()).update(job.time_original)
        by_key = {v.key: v for v in self.plan.variants}
        self.variants = [by_key[key] for key in [ORIGINAL, *sorted(k for k in self.todo if k != ORIGINAL)]
                         if key in self.todo and key in by_key]
        unknown = set(self.todo) - set(by_key)
        if unknown:
            raise RuntimeError(f"the build plan of {job.solution} has no variants {sorted(unknown)[:3]}")
        wanted = set(job.record_references).union(*self.todo.values(), *self.replay.values())
        for group in input_runs([entries[key] for key, *_ in job.entry_keys], wanted, job.first):
            self._run_group(group)
        self.send(Done(self.clock.take(), int(torch.cuda.max_memory_reserved(self.device))))

    def _warm(self) -> None:
        """A warm-up job (`Job.warm`): each input and its references made into the reference cache, group by
        group, nothing kept; it ends at the first input whose references the cache does not take (too large)."""
        import torch

        from oracleaudit.files import file_sha256
        from oracleaudit.pool import Pool
        from oracleaudit.problem import problem_at

        job = self.job
        self.send(Built(0.0))
        self.problem = problem_at(job.problem_path)
        self.problem_sha = file_sha256(self.problem.path)
        entries = self._entries(Pool.load(job.pool))
        keys = [key for key, *_ in job.entry_keys]
        for group in input_runs([entries[key] for key in keys], set(keys)):
            self.ref_model = self.model64 = None
            if not all(self._cached(group, entry) for entry in group):
                break  # too large for the cache: the job's slices make them
        self.ref_model = self.model64 = self.host = None
        self.send(Done(self.clock.take(), int(torch.cuda.max_memory_reserved(self.device))))

    def _cached(self, group: list, entry) -> bool:
        """Whether the cache holds `entry`'s input and references, made here (with the group's Model) if not."""
        from oracleaudit.execution.references import reference_key

        key = reference_key(self.problem_sha, entry, self.mode(entry))
        if not self.cache.path(key).is_file():
            if self.ref_model is None:
                with self.clock("references"):
                    self.module = group[0].load_problem(self.problem)
                    self.weight_seed = group[0].weight_seed
                    self._make_reference_model()
            self.host = OrderedDict()
            self._host_entry(entry)
        return self.cache.path(key).is_file()

    def mode(self, entry) -> dict[str, Any]:
        """The TF32 flags (and device) the pairs and the fp32 reference of `entry` run under."""
        from oracleaudit.pool import recorded_mode

        if entry.math_mode not in self.modes:
            self.modes[entry.math_mode] = recorded_mode(entry.math_mode, self.device_name)
        return self.modes[entry.math_mode]

    def _entries(self, pool) -> dict[str, Any]:
        """The job's pool entries, resolved with the shapes the runner resolved (or resolved here)."""
        from dataclasses import replace

        job = self.job
        if job.shapes:
            shapes = {name: (overrides, inputs) for name, overrides, inputs in job.shapes}
            entries = {e.key: replace(e, overrides=shapes[e.shape][0], input_shapes=shapes[e.shape][1])
                       for e in pool if e.shape in shapes}
        else:
            entries = {e.key: e for e in pool.entries_for(self.problem)}
        missing = [key for key, *_ in job.entry_keys if key not in entries]
        if missing:
            raise RuntimeError(f"pool {job.pool} has no inputs {missing[:3]} for {self.problem.label} any more")
        return entries

    # ---- one run of a shape group (plan.input_runs) ------------------------------------------------------

    def _run_group(self, group: list) -> None:
        import torch

        job = self.job
        mark("group")
        with self.clock("references"):
            self.module = group[0].load_problem(self.problem)
            self.weight_seed = group[0].weight_seed
            self._make_reference_model()
        mark("model")
        self.model64 = None
        self.host: OrderedDict[str, HostEntry] = OrderedDict()
        self.gpu: GpuEntry | None = None
        self.pin_entries = False  # entries go to the GPU from pinned memory (`entries.pins`)
        self.templates: dict[str, ModelTemplates] = {}
        self.pending_references = {e.key for e in group if e.key in job.record_references}
        pairs = [(v, e, e.key not in self.todo.get(v.key, ())) for v in self.variants for e in group
                 if e.key in self.todo.get(v.key, ()) or e.key in self.replay.get(v.key, ())]
        if pairs:
            by_input = self._by_input(self._host_entry(pairs[0][1]).bytes, len(group))
            if by_input:  # every variant on one input, then the next
                index = {e.key: i for i, e in enumerate(group)}
                pairs.sort(key=lambda p: (index[p[1].key], self.variants.index(p[0])))
            self.on_host = by_input
            self.pin_entries = pins(self.device, by_input)
            for variant, entry, replay in pairs:
                if by_input:
                    self._drop_templates_over_budget()
                elif variant.key not in self.templates:
                    self.templates.clear()  # variant by variant: one template at a time
                if replay:
                    self._replay_pair(variant, entry)
                else:
                    self._run_pair(variant, entry)
        for entry in group:
            if entry.key in self.pending_references:
                self._gpu_entry(entry)
        self.gpu = None
        self.host.clear()
        self.templates.clear()
        self.ref_model = self.model64 = None
        # Cached blocks beyond the peak the lease was sized by go back to the GPU; within it they serve the next
        # group (emptying the cache waits for the device: 124 ms a group, 4% of a profiled run's worker time).
        if self.peak_sent is None or torch.cuda.memory_reserved(self.device) > self.peak_sent:
            torch.cuda.empty_cache()

    def _by_input(self, entry_bytes: int, inputs: int) -> bool:
        """Whether a group of `inputs` entries of `entry_bytes` each (inputs and references) runs input by input:
        unless copying the entry to the GPU for every pair copies less than copying a template there for every
        pair (the Model's weights as the measure of a template) and the group's entries stay on the host."""
        model_bytes = tensor_bytes([*self.ref_model.parameters(), *self.ref_model.buffers()])
        cheaper = entry_bytes > model_bytes and os.environ.get(ORDER_ENV) != "variant"
        return cheaper or entry_bytes * inputs > HOST_BUDGET_BYTES

    def _make_reference_model(self) -> None:
        """The group's init args and fp32 Model, after its weight seed (KernelBench's 42, or a trial's own)."""
        import torch

        torch.manual_seed(self.weight_seed)
        self.init = entry_init(self.module, self.device)
        torch.manual_seed(self.weight_seed)
        self.ref_model = self.module.Model(*self.init).to(self.device).eval()

    def _record_reference(self, gpu: "GpuEntry") -> None:
        """Send the fp32 reference's rows on this input: its evidence against the fp64 reference."""
        from oracleaudit.execution.measure import measure_many

        job = self.job
        self.pending_references.discard(gpu.key)
        with self.clock("evidence"):
            evidence, _ = measure_many(list(zip(gpu.ref32, gpu.ref64)), engine=job.evidence_engine)
            rows = tuple(row(REFERENCE, job.problem, job.entry(gpu.key), index, Status.OK, None, None, None, None,
                             self.mode(gpu.entry), None, ev) for index, ev in enumerate(evidence))
        self.send(Rows(REFERENCE, gpu.key, rows))

    # ---- inputs and references -------------------------------------------------------------------------

    def _host_entry(self, entry) -> HostEntry:
        """The entry's inputs and references on the host: kept (within the budget), cached on disk, or made."""
        from oracleaudit.execution.references import reference_key

        if entry.key in self.host:
            self.host.move_to_end(entry.key)
            return self.host[entry.key]
        with self.clock("references"):
            key = reference_key(self.problem_sha, entry, self.mode(entry))
            ref32, ref64, inputs = self.cache.compute_once(key, lambda: self._compute_references(entry))
            if inputs is None:  # not kept with its references (references.storable): made again
                inputs = self._make_inputs(entry)
            host = HostEntry(entry, inputs, ref32, ref64)
            self.host[entry.key] = host
            while len(self.host) > 1 and sum(h.bytes for h in self.host.values()) > HOST_BUDGET_BYTES:
                self.host.popitem(last=False)
        return host

    def _make_inputs(self, entry) -> list:  # traced with its seconds: what the input cache saves
        started = time.monotonic()
        inputs = entry.make_inputs(self.module, "cpu")
        mark("inputs", seconds=round(time.monotonic() - started, 4))
        return inputs

    def _compute_references(self, entry) -> tuple[list, list, list]:
        import torch

        from oracleaudit.pool import math_flags

        inputs = self._make_inputs(entry)
        if self.model64 is None:
            self.model64 = copy.deepcopy(self.ref_model).double()
        # Each model gets its own copy of the inputs: a forward may change its inputs in place.
        with torch.no_grad(), math_flags(entry.math_mode):
            ref32 = [t.detach().cpu() for t in tensors(self.ref_model(*map_tensors(inputs, self._to_device)))]
            ref64 = [t.detach().cpu() for t in tensors(self.model64(
                *to_double(map_tensors(inputs, self._to_device))))]
        return ref32, ref64, inputs

    def _to_device(self, t):
        return t.to(self.device)

    def _gpu_entry(self, entry) -> GpuEntry:
        if self.gpu is not None and self.gpu.key == entry.key:
            return self.gpu
        self.gpu = None
        host = self._host_entry(entry)
        with self.clock("references"):
            if self.pin_entries and not host.pinned:
                if self.on_host:  # input by input each entry goes to the GPU once a group: those before are done
                    for key in [key for key, kept in self.host.items() if kept.pinned and key != entry.key]:
                        del self.host[key]
                if sum(h.bytes for h in self.host.values() if h.pinned) + host.bytes <= PINNED_BUDGET_BYTES:
                    host.pin()

            def move(t):
                return t.to(self.device, non_blocking=t.is_pinned())

            gpu = GpuEntry(entry, map_tensors(host.inputs, move), [move(t) for t in host.ref32],
                           [move(t) for t in host.ref64])
            gpu.sums = self._sums(gpu)
        self.gpu = gpu
        if entry.key in self.pending_references:
            self._record_reference(gpu)
        return gpu

    def _sums(self, gpu: GpuEntry):
        """The checksums of what the GPU keeps for the pairs of this entry, on the GPU (no transfer): the Models'
        parameters (a forward may update their buffers), the fp64 copy's too (a stray write into them once put
        a shape group's fp64 references of a bundled problem off by ~3e-2)."""
        model64 = [*self.model64.parameters()] if self.model64 is not None else []
        return checksums([*tensors(gpu.inputs), *gpu.ref32, *gpu.ref64, *tensors(self.init),
                          *self.ref_model.parameters(), *model64])

    def _changed(self, gpu: GpuEntry):
        """Whether any checksum of the entry and the Model differs from the one made with them: a one-element
        bool tensor on the GPU (fetched with the pair's evidence)."""
        return (self._sums(gpu) != gpu.sums).any().reshape(1)

    def _intact(self, changed: bool | None = None) -> bool:
        """Whether the GPU entry and the Model are as made (`changed`: `_changed`, fetched already, or
        computed here); if a stray write changed them, they are made again (and False is returned)."""
        gpu = self.gpu
        if gpu is None:
            return True
        if changed is None:
            changed = bool(self._changed(gpu).item())
        if not changed:
            return True
        print(f"oracleaudit worker: inputs, references or the Model of {self.problem.label} changed on the GPU; "
              "making them again", file=sys.stderr)
        self.gpu = None
        self._make_reference_model()
        self.model64 = None
        self._gpu_entry(gpu.entry)
        return False

    # ---- one pair --------------------------------------------------------------------------------------

    def _solution(self, variant):
        from oracleaudit.execution import build as builds

        if variant.key not in self.solutions:
            with self.clock("load"):
                try:
                    self.solutions[variant.key] = builds.load_variant(self.plan, self.built, variant)
                except Exception as err:
                    traceback.print_exc()
                    self.solutions[variant.key] = err
        return self.solutions[variant.key]

    def _fresh_model(self, variant, solution):
        """The variant's model for the next pair, made before the pair starts (a shape group's first one, its
        weights initialised, takes a tenth of a second and more: no part of a deadline, nor of the original's
        time that sets them); what its construction raised, if it failed, to be the pair's outcome."""
        try:
            templates = self.templates.get(variant.key)
            if templates is None:
                templates = self.templates[variant.key] = ModelTemplates(solution.ModelNew, self.device,
                                                                         self.on_host, self.weight_seed)
            with self.clock("load"):
                return templates.fresh(None, self.init)  # one set of init args per group
        except Exception as err:
            return err

    def _drop_templates_over_budget(self) -> None:
        while len(self.templates) > 1 and sum(t.bytes() for t in self.templates.values()) > TEMPLATE_BUDGET_BYTES:
            self.templates.pop(next(iter(self.templates)))

    def _run_pair(self, variant, entry) -> None:
        import torch

        job = self.job
        where = job.entry(entry.key)
        # The variant's module and the input's references are made before the pair starts: waiting for them
        # (a reference another worker is computing or writing) is no part of the variant's deadline.
        solution = self._solution(variant)
        gpu = None if isinstance(solution, BaseException) else self._gpu_entry(entry)
        model = None if gpu is None else self._fresh_model(variant, solution)
        mark("pair", variant=variant.key, input=entry.key)
        self.send(Started(variant.key, entry.key))
        if gpu is None:
            self._send_rows(variant, entry, [row(variant.key, job.problem, where, 0, status_of(solution),
                                                 type(solution).__name__, first_line(solution), None, None,
                                                 self.mode(entry), None, None)])
            return
        try:
            # No synchronisation here: the pair's one transfer comes after the evidence (an asynchronous
            # fault of the kernel surfaces there, and is its crash).
            if isinstance(model, BaseException):
                raise model
            begin, end, first, second = self._execute(model, gpu)
        except Exception as err:
            traceback.print_exc()
            rows = [row(variant.key, job.problem, where, 0, status_of(err), type(err).__name__, first_line(err),
                        None, None, self.mode(entry), None, None)]
            if is_out_of_memory(err):
                torch.cuda.empty_cache()
            if not context_alive():
                self._fatal(variant, entry, rows, err)
            self._intact()
            self._send_rows(variant, entry, rows)
            return
        try:
            rows = self._observe(variant.key, where, gpu, (begin, end), first, second)
        except Exception as err:
            # With the CUDA context dead, a fault of the variant surfaced late (asynchronously): its crash.
            # With the context alive the failure is oracleaudit's own: the job fails loudly.
            if context_alive():
                raise
            traceback.print_exc()
            self._fatal(variant, entry, [row(variant.key, job.problem, where, 0, Status.RUNTIME_ERROR, type(err).__name__,
                                             first_line(err), None, None, self.mode(entry), None, None)], err)
        self._send_rows(variant, entry, rows)

    def _execute(self, model_new, gpu: GpuEntry) -> tuple:
        """Kernel → reference → kernel on a fresh model and a fresh copy of the input, not synchronised:
        the events timing the first run, the first run's outputs (cloned) and the second's."""
        import torch

        from oracleaudit.pool import math_flags

        with self.clock("execution"), torch.no_grad(), math_flags(gpu.entry.math_mode):
            inputs = map_tensors(gpu.inputs, lambda t: t.clone())
            poison_blocks(gpu.ref32)  # what the outputs' memory holds before the kernel writes (guard.py)
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            first = [t.detach().clone() for t in tensors(model_new(*inputs))]
            end.record()
            self.ref_model(*inputs)  # kernel → reference → kernel: exposes reuse of stale buffers
            second = [t.detach() for t in tensors(model_new(*inputs))]
        return begin, end, first, second

    def _replay_pair(self, variant, entry) -> None:
        """Run a pair of `Job.replay` again as it ran before, recording nothing: what the variant's process
        state would hold had its process not died. A fault that kills the context ends this worker (the
        supervisor then drops the variant's replay); any other exception was the pair's recorded outcome."""
        import torch

        solution = self._solution(variant)
        if isinstance(solution, BaseException):
            return
        gpu = self._gpu_entry(entry)
        model = self._fresh_model(variant, solution)
        mark("pair", variant=variant.key, input=entry.key, replay=True)
        self.send(Started(variant.key, entry.key, replay=True))
        with self.clock.instead("replay"):
            try:
                if isinstance(model, BaseException):
                    raise model
                self._execute(model, gpu)
                torch.cuda.synchronize(self.device)
            except Exception as err:
                if is_out_of_memory(err):
                    torch.cuda.empty_cache()
                if not context_alive():
                    self.send(Fatal(variant.key, entry.key, f"{type(err).__name__}: {first_line(err)}"))
                    os._exit(3)
            self._intact()
        self.send(Rows(variant.key, entry.key, (), self.clock.take()))

    def _send_rows(self, variant, entry, rows: list[dict]) -> None:
        import torch

        self.todo.get(variant.key, set()).discard(entry.key)
        self.send(Rows(variant.key, entry.key, tuple(rows), self.clock.take()))
        if self.peak_sent is None:
            self.peak_sent = int(torch.cuda.max_memory_reserved(self.device))
            self.send(Memory(self.peak_sent))

    def _fatal(self, variant, entry, rows: list[dict], err: BaseException) -> None:
        """The CUDA context is dead: send the pair's rows, say why, and end this process (the supervisor
        continues the job in a fresh worker)."""
        self.send(Rows(variant.key, entry.key, tuple(rows), self.clock.take()))
        self.send(Fatal(variant.key, entry.key, f"{type(err).__name__}: {first_line(err)}"))
        mark("exit")
        os._exit(3)

    def _observe(self, key: str, where: tuple, gpu: GpuEntry, timing: tuple, first: list, second: list) -> list[dict]:
        """The rows of one variant on one input: status, bitwise repeat, evidence against both references.
        Everything the host needs — the evidence of every output against both references, the repeat
        comparisons and the checksums of what the GPU keeps — comes back in one transfer. If the checksums
        show a stray write into the references, they are made again and the outputs measured again."""
        import torch

        from oracleaudit.execution.measure import measure_many

        job = self.job
        if len(first) != len(gpu.ref32):
            timing[1].synchronize()
            self._intact()
            return [row(key, job.problem, where, 0, Status.SHAPE_MISMATCH, None, f"{len(first)} outputs, reference has "
                        f"{len(gpu.ref32)}", timing[0].elapsed_time(timing[1]), None, self.mode(gpu.entry), None, None)]
        with self.clock("evidence"):
            items, repeats = [], []
            for out, again, r32, r64 in zip(first, second, gpu.ref32, gpu.ref64):
                items += [(out, r32), (out, r64)]
                if not (out.shape == again.shape and out.dtype == again.dtype):
                    repeats.append(False)
                elif out.is_cuda and again.is_cuda:
                    repeats.append((bits(out) == bits(again)).all())  # on the device, fetched below
                else:
                    repeats.append(torch.equal(bits(out), bits(again)))
            device_repeats = [r for r in repeats if isinstance(r, torch.Tensor)]
            evidence, fetched = measure_many(items, engine=job.evidence_engine,
                                             extra=[*device_repeats, self._changed(gpu)])
            elapsed = timing[0].elapsed_time(timing[1])  # both events are done: the transfer waited for them
            fetched_repeats = iter(fetched[:-1])
            same = [bool(next(fetched_repeats)[0]) if isinstance(r, torch.Tensor) else bool(r) for r in repeats]
            if not self._intact(bool(fetched[-1][0])):  # measured against what a stray write left: measure again
                gpu = self.gpu
                items = [(out, ref) for out, r32, r64 in zip(first[:len(same)], gpu.ref32, gpu.ref64)
                         for ref in (r32, r64)]
                evidence, _ = measure_many(items, engine=job.evidence_engine)
        rows = []
        for index, (out, r32) in enumerate(zip(first[:len(same)], gpu.ref32)):
            status = Status.OK
            if out.shape != r32.shape:
                status = Status.SHAPE_MISMATCH
            elif out.dtype != r32.dtype:
                status = Status.DTYPE_MISMATCH
            rows.append(row(key, job.problem, where, index, status, None, None, elapsed, same[index], self.mode(gpu.entry),
                            evidence[2 * index], evidence[2 * index + 1]))
        return rows


def main(conn, gpu: str, environ: dict[str, str] | None = None, cwd: str | None = None) -> None:
    """Worker process entry point: take the parent's `environ` and working folder (a fork server keeps
    those it started with), bring CUDA up, say Ready, then take jobs from the pipe until None arrives.
    Ctrl-C is the parent's to handle: a worker dying of it would be recorded as a mutant's crash."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    if cwd is not None:
        os.chdir(cwd)
    os.environ.setdefault("MAX_JOBS", "2")
    mark("main")
    import torch

    torch.cuda.set_device(torch.device(gpu))
    mark("init")
    torch.zeros(1, device=gpu)  # the CUDA context, now: a spare worker is ready when it is needed
    free, total = torch.cuda.mem_get_info(torch.device(gpu))
    mark("ready")
    conn.send(Ready(int(total), int(free)))
    while True:
        job = conn.recv()
        if job is None:
            return
        mark("job")
        if job.cpu_threads:  # workers sharing a machine share its cores: OpenMP teams of every core each thrash
            torch.set_num_threads(job.cpu_threads)
        try:
            with profiled():
                JobRun(job, conn.send).run()
        except Exception as err:
            traceback.print_exc()
            alive = context_alive()
            conn.send(Failed(f"{type(err).__name__}: {first_line(err)}", alive, is_out_of_memory(err)))
            if not alive:  # a dead CUDA context fails every later job: let the supervisor start a fresh worker
                os._exit(3)
        finally:
            torch.cuda.empty_cache()
