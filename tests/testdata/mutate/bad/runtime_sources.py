"""cuda_sources is read from a file at run time: mutations cannot be mapped back to a string literal."""
from pathlib import Path

from torch.utils.cpp_extension import load_inline

source = Path(__file__).with_suffix(".cu").read_text()
module = load_inline(name="runtime_sources", cpp_sources="", cuda_sources=source, functions=[])
