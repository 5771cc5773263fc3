"""The `memplan` command line (`main`) and the conventions every script shares: `args` (flags), `tables` (output)."""
