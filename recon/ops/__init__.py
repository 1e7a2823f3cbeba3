"""Operations: the only code that sequences stages (run, rebuild, rollback, expire). The CLI,
the spark-submit job and the demo call these; none of them strings stages together itself."""
