"""seedpool's own error types: what a caller did wrong, told in one line.

The command line prints an error of these types as one line and exits with status 2; any
other exception reaching it is a defect in seedpool and is shown with its traceback. Each
type also derives from the built-in exception that Python code would raise for the same
mistake (``ValueError`` or ``TypeError``), so ``except ValueError`` keeps working.
This module imports nothing from seedpool: every layer may raise its types.
"""
from __future__ import annotations


class SeedpoolError(Exception):
    """Base of the errors seedpool raises for input it cannot accept; the message says what to change."""


class ConfigError(SeedpoolError, ValueError):
    """An option, config value or argument outside what seedpool accepts."""


class ConfigTypeError(SeedpoolError, TypeError):
    """An argument of a type seedpool does not take (an env factory returning a non-Env, ...)."""


class UnknownEnvError(ConfigError):
    """A task id that neither seedpool nor gymnasium knows."""
