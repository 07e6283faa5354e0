"""The CPU parts of bench/pair_cost.py: kernel names sorted into kinds as torch.profiler names the run stage's
kernels, the per-pair figures summed over the children's records, and its sample of a mutate output."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from oracleaudit.mutant import read_mutants
from oracleaudit.shipped import shipped_dir

ROOT = Path(__file__).parents[2]
spec = importlib.util.spec_from_file_location("pair_cost", ROOT / "bench" / "pair_cost.py")
pair_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pair_cost)


@pytest.mark.parametrize("name, kind", [
    ("void pass1<float>(float const*, float const*, long long, Grid, unsigned long long*)", "evidence"),
    ("finish2(int, int, unsigned long long const*, double*)", "evidence"),
    ("Memcpy DtoH (Device -> Pinned)", "memcpy/memset"),
    ("Memset (Device)", "memcpy/memset"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<long, at::native::func_wrapper_t<long, "
     "at::native::sum_functor<int, long, long>::operator()>, unsigned int, long, 4, 4> >", "reductions"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::direct_copy_kernel_cuda", "copies and casts"),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<1>",
     "copies and casts"),
    ("scale_shift_kernel(float const*, float*, int)", "variant and reference"),
    ("ampere_sgemm_128x64_nn", "variant and reference"),
])
def test_kernel_names_fall_into_their_kinds(name: str, kind: str) -> None:
    assert pair_cost.kind_of(name) == kind


def test_per_pair_figures_sum_the_children_s_records() -> None:
    records = [
        {"solution": "a.py", "pairs": 10, "wall_s": 0.5,
         "kernels": {"void pass1<float>(x)": [20, 100.0], "Memcpy DtoH (Device -> Pinned)": [10, 30.0],
                     "relu_kernel(float*)": [20, 50.0]}},
        {"solution": "b.py", "pairs": 30, "wall_s": 1.5,
         "kernels": {"void pass1<float>(x)": [60, 300.0], "gemm_kernel": [60, 920.0]},
         "runtime": {"cudaLaunchKernel": 120, "cudaStreamSynchronize": 50, "cudaEventSynchronize": 10}},
    ]
    summary = pair_cost.summarize(records)
    assert summary["pairs"] == 40
    assert summary["wall_ms_per_pair"] == 50.0
    assert summary["device_us_per_pair"] == pytest.approx(1400.0 / 40)
    assert summary["launches_per_pair"] == pytest.approx(170 / 40)
    assert summary["by_kind"]["evidence"] == {"device_us_per_pair": 10.0, "launches_per_pair": 2.0}
    assert summary["by_kind"]["variant and reference"]["device_us_per_pair"] == pytest.approx(970.0 / 40)
    assert summary["by_kind"]["reductions"] == {"device_us_per_pair": 0.0, "launches_per_pair": 0.0}
    assert [k["name"] for k in summary["top_kernels"]][:2] == ["gemm_kernel", "void pass1<float>(x)"]
    assert summary["syncs_per_pair"] == 1.5  # 60 synchronisations over 40 pairs
    assert summary["runtime_calls_per_pair"] == {"cudaLaunchKernel": 3.0, "cudaStreamSynchronize": 1.25,
                                                 "cudaEventSynchronize": 0.25}
    assert pair_cost.summarize(records[:1])["syncs_per_pair"] is None  # a record without runtime calls
    assert pair_cost.summarize([]) == {"pairs": 0}


def test_worker_counts_are_checked() -> None:
    assert pair_cost._counts("1,2,8") == [1, 2, 8]
    for bad in ("0,2", "a", ""):
        with pytest.raises(Exception, match="worker counts|comma-separated"):
            pair_cost._counts(bad)


def test_the_sample_spreads_over_the_solutions_and_takes_the_first_mutants_by_id(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    bundled = shipped_dir("kill_matrix") / "mutants"
    chosen = pair_cost._sample(bundled, 3, 2, tmp_path / "sample")
    everything = read_mutants(bundled)
    sources = sorted({m.source for m in everything})
    assert chosen == sources[::len(sources) // 3][:3]
    sample = read_mutants(tmp_path / "sample")
    for source in chosen:
        first = sorted((m.id for m in everything if m.source == source), key=str)[:2]
        assert sorted(m.id for m in sample if m.source == source) == first
    assert len(sample) == 6


def test_named_solutions_are_sampled_and_an_unknown_one_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    bundled = shipped_dir("kill_matrix") / "mutants"
    named = sorted({m.source for m in read_mutants(bundled)})[-2:]
    assert pair_cost._sample(bundled, 8, 1, tmp_path / "sample", named) == named
    assert sorted({m.source for m in read_mutants(tmp_path / "sample")}) == named
    with pytest.raises(SystemExit, match="no Pending mutants of datasets/none.py"):
        pair_cost._sample(bundled, 8, 1, tmp_path / "other", ["datasets/none.py"])


def test_the_sample_passes_over_the_excluded_mutants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    bundled = shipped_dir("kill_matrix") / "mutants"
    named = sorted({m.source for m in read_mutants(bundled)})[:1]
    ids = sorted((m.id for m in read_mutants(bundled) if m.source == named[0]), key=str)
    listed = tmp_path / "faulty.tsv"
    listed.write_text(f"# a comment line\n{ids[0]}\thung\n\n{ids[2]}  # crashed\n")
    pair_cost._sample(bundled, 8, 3, tmp_path / "sample", named, listed)
    assert sorted(m.id for m in read_mutants(tmp_path / "sample")) == [ids[1], ids[3], ids[4]]


def test_a_missing_exclude_file_is_one_error_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", str(tmp_path),
                           "--exclude", str(tmp_path / "none.tsv")], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"--exclude {tmp_path / 'none.tsv'}: no such file")


def test_help_runs_without_a_gpu() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--help"], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 0 and "--workers" in done.stdout


def test_order_ratios_compare_the_two_orders_where_both_ran() -> None:
    workers = [{"workers_per_gpu": 8, "order": "auto", "pairs_per_s": 300.0},
               {"workers_per_gpu": 8, "order": "variant", "pairs_per_s": 120.0},
               {"workers_per_gpu": 4, "order": "auto", "pairs_per_s": 200.0}]
    assert pair_cost.order_ratios(workers) == {"8": 2.5}


def test_host_pair_ratios_compare_each_bound_with_the_first_under_the_same_order() -> None:
    workers = [{"workers_per_gpu": 8, "order": "auto", "host_pairs": 2048, "pairs_per_s": 100.0},
               {"workers_per_gpu": 8, "order": "auto", "host_pairs": 65536, "pairs_per_s": 150.0},
               {"workers_per_gpu": 8, "order": "variant", "host_pairs": 2048, "pairs_per_s": 80.0},
               {"workers_per_gpu": 8, "order": "variant", "host_pairs": 65536, "pairs_per_s": 60.0},
               {"workers_per_gpu": 4, "order": "auto", "host_pairs": 65536, "pairs_per_s": 90.0}]
    assert pair_cost.setting_ratios(workers, "host_pairs", 65536, 2048) == {"8 order=auto": 1.5,
                                                                           "8 order=variant": 0.75}
    assert pair_cost.order_ratios(workers) == {"8 host_pairs=2048": 1.25, "8 host_pairs=65536": 2.5}
    single = [w for w in workers if w["order"] == "auto"]
    assert pair_cost.setting_ratios(single, "host_pairs", 65536, 2048) == {"8": 1.5}


def test_a_bad_host_pair_bound_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", "x", "--host-pairs",
                           "2048,lots"], capture_output=True, text=True)
    assert done.returncode == 2 and "not a comma-separated list of hull candidate bounds" in done.stderr


def test_an_unknown_order_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", "x", "--orders",
                           "auto,sideways"], capture_output=True, text=True)
    assert done.returncode == 2 and "--orders takes auto and variant" in done.stderr


def test_pinned_ratios_hold_the_other_settings_alike() -> None:
    workers = [{"workers_per_gpu": 8, "order": "auto", "host_pairs": 2048, "pinned": 0, "pairs_per_s": 100.0},
               {"workers_per_gpu": 8, "order": "auto", "host_pairs": 2048, "pinned": 1, "pairs_per_s": 180.0},
               {"workers_per_gpu": 8, "order": "auto", "host_pairs": 65536, "pinned": 1, "pairs_per_s": 90.0}]
    assert pair_cost.setting_ratios(workers, "pinned", 1, 0) == {"8 order=auto host_pairs=2048": 1.8}


def test_a_pinned_value_other_than_0_1_or_variant_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", "x", "--pinned", "2"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--pinned takes 0, 1 and variant" in done.stderr
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", "x", "--pinned",
                           "variant,1,always"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "--pinned takes 0, 1 and variant" in done.stderr


def test_pinned_ratios_compare_the_variant_policy_with_the_package_s() -> None:
    workers = [{"workers_per_gpu": 8, "order": "auto", "pinned": "variant", "pairs_per_s": 100.0},
               {"workers_per_gpu": 8, "order": "auto", "pinned": "1", "pairs_per_s": 125.0}]
    assert pair_cost.setting_ratios(workers, "pinned", "1", "variant") == {"8": 1.25}


def test_a_job_size_below_1_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", "x", "--job-size", "0"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "--job-size must be ≥ 1" in done.stderr and "Traceback" not in done.stderr


def test_spinner_counts_may_be_zero_and_their_ratios_hold_the_other_settings_alike() -> None:
    assert pair_cost._counts("0,1", "spinning kernel counts", low=0) == [0, 1]
    with pytest.raises(Exception, match="spinning kernel counts must be ≥ 0"):
        pair_cost._counts("-1", "spinning kernel counts", low=0)
    workers = [{"workers_per_gpu": 8, "order": "auto", "host_pairs": 65536, "spinners": 0, "pairs_per_s": 300.0},
               {"workers_per_gpu": 8, "order": "auto", "host_pairs": 65536, "spinners": 1, "pairs_per_s": 100.0},
               {"workers_per_gpu": 8, "order": "auto", "host_pairs": 2048, "spinners": 0, "pairs_per_s": 200.0},
               {"workers_per_gpu": 8, "order": "auto", "host_pairs": 2048, "spinners": 1, "pairs_per_s": 150.0}]
    assert pair_cost.setting_ratios(workers, "spinners", 1, 0) == {"8 order=auto host_pairs=65536": 0.33,
                                                                    "8 order=auto host_pairs=2048": 0.75}


def test_a_negative_spinner_count_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "pair_cost.py"), "--mutants", "x", "--spinners",
                           "0,-1"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2 and "spinning kernel counts must be ≥ 0" in done.stderr


def test_a_sync_site_is_the_innermost_oracleaudit_frame_and_sites_add_up_per_pair() -> None:
    import traceback

    frames = [traceback.FrameSummary("/x/bench/pair_cost.py", 10, "_profile_job"),
              traceback.FrameSummary("/x/oracleaudit/execution/worker.py", 20, "_observe"),
              traceback.FrameSummary("/x/oracleaudit/execution/measure.py", 103, "fetch"),
              traceback.FrameSummary("/usr/lib/torch/_tensor.py", 5, "cpu")]
    assert pair_cost.sync_site(frames) == "measure.py:103 fetch"
    assert pair_cost.sync_site(frames[:1]) == "pair_cost.py:10 _profile_job"
    records = [{"pairs": 2, "wall_s": 1.0, "kernels": {}, "sync_sites": {"measure.py:103 fetch": 2}},
               {"pairs": 2, "wall_s": 1.0, "kernels": {}, "sync_sites": {"measure.py:103 fetch": 2,
                                                                         "worker.py:420 _execute": 1}}]
    assert pair_cost.summarize(records)["sync_sites_per_pair"] == {"measure.py:103 fetch": 1.0,
                                                                   "worker.py:420 _execute": 0.25}
    assert "sync_sites_per_pair" not in pair_cost.summarize([{**r, "sync_sites": {}} for r in records])
