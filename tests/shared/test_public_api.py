"""The public API: a small, explicit surface re-exported from the stages, loaded lazily."""

from __future__ import annotations

import subprocess
import sys

import oracleaudit


def test_every_public_name_resolves_to_the_stage_object_it_names() -> None:
    for name in oracleaudit.__all__:
        assert getattr(oracleaudit, name) is not None, name
    from oracleaudit.mutation import mutate
    from oracleaudit.scoring import Audit

    assert oracleaudit.mutate is mutate and oracleaudit.Audit is Audit


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        oracleaudit.no_such_thing
    except AttributeError as err:
        assert "no_such_thing" in str(err)
    else:
        raise AssertionError("expected AttributeError")


def test_importing_the_package_loads_no_parser_and_no_torch() -> None:
    code = ("import sys, oracleaudit; "
            "print(any(m in sys.modules for m in ('tree_sitter', 'clang', 'torch')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
