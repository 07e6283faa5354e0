"""`python -m oracleaudit` is the `oracleaudit` command (for machines where the package is on PYTHONPATH only)."""

import sys

from oracleaudit.cli import main

sys.exit(main())
