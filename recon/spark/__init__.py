"""Everything that talks to Spark: sessions, dump reading, the stage jobs (I/O at the edges)."""
