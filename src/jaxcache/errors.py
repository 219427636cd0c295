"""Errors that end a command with one clear line instead of a traceback."""

from __future__ import annotations


class JaxcacheError(Exception):
    """Bad input or an environment jaxcache cannot work in: exit code 2."""

    exit_code = 2


class PolicyError(JaxcacheError):
    """The policy file is missing, unsafe or malformed."""
