"""The work of `seal`, `verify` and `verify --quarantine` over every entry of a directory or a
bucket prefix."""
