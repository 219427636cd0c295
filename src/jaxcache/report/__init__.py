"""Output formats: each its own module with one `render(...) -> str` per kind of result."""
