"""Where the catalogs and data shipped with oracleaudit live, from a source checkout or an installed wheel."""

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def shipped_dir(name: str) -> Path:
    """Return the shipped folder `name` (mutators, oracles, kill_matrix, datasets).

    In a source checkout (or an editable install) the folders sit next to the package; in a wheel they
    are copied into `oracleaudit/_shipped/`.
    """
    for candidate in (_PACKAGE.parent / name, _PACKAGE / "_shipped" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"shipped folder {name!r} not found next to {_PACKAGE}")
