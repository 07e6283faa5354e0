"""The `oracleaudit` command line: argument parsing plus one library call per subcommand."""

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
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from oracleaudit import commands

    for register in commands.REGISTRY:
        register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except OracleAuditError as err:
        print(f"oracleaudit: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("oracleaudit: interrupted; results recorded so far are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
