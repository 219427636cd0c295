"""Writing into a directory tier: create-only publishing, the tier's file names, the account's
lock and LRU eviction."""
