"""Attacks on every verdict, played by a second real user, and the fuzzers of every
document parser a writer controls."""
