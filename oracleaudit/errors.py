"""The one error type that bad user input raises; the CLI prints it as one line, without a traceback."""


class OracleAuditError(Exception):
    """A problem with the user's input or environment, phrased for the user (names the file and the cause)."""
