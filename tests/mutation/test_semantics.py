"""Type facts from libclang and the device-only view they are computed on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from oracleaudit.mutation.cudatree import CudaTree
from oracleaudit.mutation.semantics import analyse

TESTDATA = Path(__file__).parents[1] / "testdata"

REDUCTION = """\
__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffff, v, offset);
    return v;
}

__global__ void dot_kernel(const float* a, const float* b, float* out, int n) {
    float sum = 0.0f;
    float last = 0.0f;
    for (int s = n; s > 0; s >>= 1) {
        sum += a[s] * b[s];
        last = a[s];
    }
    out[0] = warp_sum(sum) + last;
}
"""

MIXED = """\
#include <torch/extension.h>
#include <cuda_fp16.h>

__global__ void add_one_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}

torch::Tensor add_one(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    add_one_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


def span(tree: CudaTree, text: str, nth: int = 0) -> tuple[int, int]:
    """Byte span of the nth occurrence of `text` in the tree's source."""
    starts = [m.start() for m in re.finditer(re.escape(text.encode()), tree.data)]
    return starts[nth], starts[nth] + len(text.encode())


@pytest.fixture(scope="module")
def kernels() -> tuple[CudaTree, object]:
    tree = CudaTree((TESTDATA / "mutate" / "kernels.cu").read_text())
    return tree, analyse(tree.clone_view(keep_host=False))


def test_libclang_types_a_float_binary_expression_of_a_real_kernel_as_float(kernels) -> None:
    tree, facts = kernels
    assert facts.type_class(*span(tree, "a * x[i] + y[i]")) == "float"
    assert facts.type_class(*span(tree, "1.0f / x[i]")) == "float"


def test_libclang_types_an_index_expression_of_a_real_kernel_as_int(kernels) -> None:
    tree, facts = kernels
    assert facts.type_class(*span(tree, "blockIdx.x * blockDim.x + threadIdx.x")) == "int"
    start, _ = span(tree, "x[i]")
    assert facts.type_class(start + 2, start + 3) == "int"  # the i inside x[i]
    assert facts.type_class(*span(tree, "255 - threadIdx.x")) == "int"


def test_libclang_parses_the_real_kernels_without_errors(kernels) -> None:
    _, facts = kernels
    assert facts.diagnostics == []


def test_a_float_updated_with_plus_equals_is_an_accumulator_and_an_int_counter_shifted_with_shr_equals_is_not() -> None:
    tree = CudaTree(REDUCTION)
    facts = analyse(tree.clone_view(keep_host=False))
    assert span(tree, "float sum")[0] in facts.accumulators
    assert span(tree, "int s")[0] not in facts.accumulators
    assert span(tree, "int offset")[0] not in facts.accumulators
    assert facts.decl_class(span(tree, "int s")[0]) == "int"


def test_a_float_only_ever_assigned_with_equals_is_not_an_accumulator() -> None:
    tree = CudaTree(REDUCTION)
    facts = analyse(tree.clone_view(keep_host=False))
    assert facts.decl_class(span(tree, "float last")[0]) == "float"
    assert span(tree, "float last")[0] not in facts.accumulators


def test_the_device_view_blanks_host_code_and_includes_but_keeps_every_byte_offset() -> None:
    tree = CudaTree(MIXED)
    view = tree.clone_view(keep_host=False)
    assert len(view) == len(tree.data)
    assert [i for i, b in enumerate(view) if b == 0x0A] == [i for i, b in enumerate(tree.data) if b == 0x0A]
    kernel = span(tree, MIXED[MIXED.index("__global__"):MIXED.index("torch::Tensor add_one")])
    assert view[kernel[0]:kernel[1]] == tree.data[kernel[0]:kernel[1]]
    host = span(tree, MIXED[MIXED.index("torch::Tensor add_one"):])
    assert view[host[0]:host[1]].strip() == b""
    assert b"#include" not in view
    assert view.decode().lstrip().startswith("__global__ void add_one_kernel")


def test_the_device_view_keeps_cuda_headers_to_hoist_but_drops_torch_ones() -> None:
    tree = CudaTree(MIXED)
    assert tree.hoisted_includes(keep_host=False) == ["#include <cuda_fp16.h>"]
    assert tree.hoisted_includes(keep_host=True) == ["#include <torch/extension.h>", "#include <cuda_fp16.h>"]


def test_the_host_view_keeps_host_code_at_the_same_offsets() -> None:
    tree = CudaTree(MIXED)
    view = tree.clone_view(keep_host=True)
    host = span(tree, "torch::Tensor add_one(torch::Tensor x)")
    assert len(view) == len(tree.data)
    assert view[host[0]:host[1]] == b"torch::Tensor add_one(torch::Tensor x)"


def test_types_found_on_the_device_view_index_the_original_source() -> None:
    tree = CudaTree(MIXED)
    facts = analyse(tree.clone_view(keep_host=False))
    assert facts.type_class(*span(tree, "x[i] + 1.0f")) == "float"
    assert facts.type_class(*span(tree, "blockIdx.x * blockDim.x + threadIdx.x")) == "int"
