"""Trivial Compiler Equivalence: a signature of the machine code each namespace clone compiled to.

Read straight from the cubin's ELF with pyelftools (no cuobjdump/nvdisasm needed; the CI machine has
neither). For every function in a clone's namespace the signature covers: its `.text.<symbol>` bytes (the
SASS), its relocations with target symbols renamed to drop the clone's namespace, the sizes of its static
shared memory (`.nv.shared.<symbol>`) and parameter bank (`.nv.constant0.<symbol>`), and the bytes of the
namespace's data objects (`__constant__` and `__device__` variables). Two clones with equal signatures run
the same machine code on the same data layout.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections import defaultdict

CLONE_NAMESPACE = re.compile(r"oa_[a-z](\d+)_")
_MANGLED_NAMESPACE = re.compile(r"\d+oa_[a-z]\d+_")


def normalise_symbol(name: str) -> str:
    """Drop the clone namespace from a (mangled or plain) symbol name."""
    return CLONE_NAMESPACE.sub("oa_", _MANGLED_NAMESPACE.sub("NS", name))


def clone_signatures(cubin: bytes) -> dict[int, str]:
    """Map clone number (the N of namespace `oa_?N_`) to the signature of its compiled code and data."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
    from elftools.elf.sections import SymbolTableSection

    elf = ELFFile(io.BytesIO(cubin))
    parts: dict[int, list[str]] = defaultdict(list)
    symtab = next(s for s in elf.iter_sections() if isinstance(s, SymbolTableSection))
    for section in elf.iter_sections():
        name = section.name
        for prefix in (".text.", ".nv.shared.", ".nv.constant0."):
            if not name.startswith(prefix):
                continue
            symbol = name[len(prefix):]
            clone = CLONE_NAMESPACE.search(symbol)
            if clone is None:
                continue
            key = f"{prefix}{normalise_symbol(symbol)}"
            if prefix == ".text.":
                digest = hashlib.sha256(section.data()).hexdigest()
            else:
                digest = str(section["sh_size"])
            parts[int(clone.group(1))].append(f"{key}={digest}")
        if isinstance(section, RelocationSection) and name.startswith((".rel.text.", ".rela.text.")):
            target = name.split(".text.", 1)[1]
            clone = CLONE_NAMESPACE.search(target)
            if clone is None:
                continue
            relocs = []
            for reloc in section.iter_relocations():
                symbol = symtab.get_symbol(reloc["r_info_sym"]).name
                addend = reloc["r_addend"] if reloc.is_RELA() else 0
                relocs.append(f"{reloc['r_offset']}:{reloc['r_info_type']}:{normalise_symbol(symbol)}:{addend}")
            parts[int(clone.group(1))].append(f"reloc.{normalise_symbol(target)}=" + ",".join(relocs))
    for symbol in symtab.iter_symbols():
        if symbol["st_info"]["type"] != "STT_OBJECT":
            continue
        clone = CLONE_NAMESPACE.search(symbol.name)
        if clone is None or symbol["st_shndx"] in ("SHN_UNDEF", "SHN_ABS", "SHN_COMMON"):
            continue
        section = elf.get_section(symbol["st_shndx"])
        size = symbol["st_size"]
        data = b"" if section["sh_type"] == "SHT_NOBITS" else section.data()[symbol["st_value"]:symbol["st_value"] + size]
        parts[int(clone.group(1))].append(f"object.{normalise_symbol(symbol.name)}@{normalise_symbol(section.name)}"
                                          f"={size}:{hashlib.sha256(data).hexdigest()}")
    return {clone: hashlib.sha256("\n".join(sorted(items)).encode()).hexdigest() for clone, items in parts.items()}


EMPTY_SIGNATURE = hashlib.sha256(b"").hexdigest()
