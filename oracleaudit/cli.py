"""The `oracleaudit` command line: argument parsing plus one library call per subcommand.

Exit codes (README.md, "Exit codes"): 0 everything done; 1 partly done (some inputs bad and reported, the rest
processed and written) or a check the user asked for failed; 2 nothing done (usage or input error, one line
naming the file or option); 130 interrupted."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from oracleaudit.errors import OracleAuditError

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oracleaudit",
        description="Audit the correctness checkers of GPU-kernel benchmarks by mutation analysis.",
        epilog="Exit codes: 0 everything done; 1 partly done (some inputs bad, the rest processed) or a "
               "requested check failed (score --fail-under, verify); 2 nothing done (usage or input error); "
               "130 interrupted.",
    )
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error instead of its one-line message")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from oracleaudit import commands

    for register in commands.REGISTRY:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    from oracleaudit.terminal import set_table_format

    set_table_format(getattr(args, "table_format", "table"))
    try:
        return handler(args)
    except (OracleAuditError, OSError) as err:
        if args.debug:
            raise
        print(f"oracleaudit: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("oracleaudit: interrupted; results recorded so far are kept", file=sys.stderr)
        return 130


def _one_line(err: BaseException) -> str:
    """The error as one line; an operating-system error (a file that cannot be written or read, a full disk)
    names its file and the cause."""
    if isinstance(err, OSError) and not isinstance(err, OracleAuditError) and err.strerror:
        where = f"{err.filename}: " if err.filename is not None else ""
        return f"{where}{err.strerror}"
    return str(err)


if __name__ == "__main__":
    sys.exit(main())
