"""One module per wire format, each a `StreamDecoder` (see `recon.formats` for the table)."""
