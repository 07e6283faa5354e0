"""The subcommands: each one registers its arguments and calls one library function."""

from __future__ import annotations

import argparse

REGISTRY: list = []


def command(register):
    """Add a subcommand registration function to the CLI."""
    REGISTRY.append(register)
    return register
