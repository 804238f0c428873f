"""Name server addresses from an HTTP address server (Java ``TopAddressing``, the
``rocketmq.namesrv.domain`` convention).

The server answers ``GET http://<domain>[:8080]/rocketmq/<subgroup>`` with a plain-text
``host:port;host:port`` list. Java fetches it when ``namesrvAddr`` is unset, then every 2 minutes.
One plain GET: the standard library's ``urllib`` does it (no HTTP client dependency).
"""

from __future__ import annotations

import logging

from ..config import DEFAULT_SUBGROUP, address_server_url  # the URL of ``namesrv_domain``: a setting

__all__ = ["DEFAULT_SUBGROUP", "address_server_url", "fetch_namesrv_addr", "parse_addr_list"]

log = logging.getLogger("rocketmq_sdk.client.namesrv")


def parse_addr_list(text: str | None) -> list[str]:
    """``"a:9876;b:9876"`` (whitespace and empty items ignored) → ``["a:9876", "b:9876"]``."""
    return [a.strip() for a in (text or "").split(";") if a.strip()]


def fetch_namesrv_addr(url: str, timeout_s: float = 3.0) -> list[str]:
    """GET ``url`` and parse the address list; [] on any failure (logged), as Java keeps the
    addresses it had.

    Args:
        url: the address server URL (see :func:`address_server_url`).
        timeout_s: connect + read timeout, seconds.
    """
    import urllib.request  # here: only clients configured with an address server use it (~20 ms)

    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - configured URL
            text = resp.read().decode("utf-8", "replace")
    except Exception as exc:
        log.warning("fetching name server addresses from %s failed: %s", url, exc)
        return []
    addrs = parse_addr_list(text.strip())
    if not addrs:
        log.warning("address server %s returned no name server address", url)
    return addrs
