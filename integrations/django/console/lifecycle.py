"""Stopping the console's background work and closing its clients, in that order (settings
changed, tests, the stand-alone server's shutdown). Above both :mod:`.sampler` and
:mod:`.service`: the sampler uses the service's admin client."""

from __future__ import annotations

from .sampler import stop_sampler
from .service import close_clients

__all__ = ["reset_clients"]


def reset_clients() -> None:
    """Stop the sampler, then close the shared clients (the next use makes new ones)."""
    stop_sampler()
    close_clients()
