"""The dataset stage: the bundled problems' verification records (`oracleaudit verify`)."""
