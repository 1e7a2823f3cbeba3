"""The decode tasks: what one task reads, decodes and writes, and how the driver commits one
attempt per task."""
