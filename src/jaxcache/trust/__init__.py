"""Who can write a cache directory, through which path, on which filesystem."""
