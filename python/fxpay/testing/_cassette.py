"""``fxpay.testing.Cassette``: record a client's HTTP exchanges once, replay them offline."""

from __future__ import annotations

import os
from typing import Any

from .._fxpay import Client, CoreCassette
from ..errors import ConfigurationError

__all__ = ["Cassette"]


class Cassette:
    """Records a client's HTTP exchanges to a JSON file, or answers them from it.

        cas = fxpay.testing.Cassette("cassettes/quote.json")      # mode="once"
        with fxpay.Client(cid, secret, base_url=url, cassette=cas) as c:
            c.create_quote(buy_currency="USD", buy_amount=1000, sell_currency="AUD")

    ``mode="record"`` sends every request and writes the exchanges when the client closes
    (``close()``, ``aclose()``, the end of a ``with`` block; or, failing those, when the
    client and the cassette are garbage-collected). ``"replay"`` answers from the file with
    no network at all; a request it does not hold raises :class:`CassetteMismatchError`.
    ``"once"`` replays if the file exists, else records.

    Requests match on method, path, query and body; the first exchange not played yet
    that matches answers, so identical requests replay in the order they were recorded.
    Client secrets, authorization codes, code verifiers, access and refresh tokens,
    ``Authorization`` headers and callback nonces are replaced by stable placeholders such as
    ``fxpay-scrubbed-access-token-1`` before anything is written or compared.
    """

    __slots__ = ("_core",)

    def __init__(self, path: str | os.PathLike[str], *, mode: str = "once") -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        fspath = os.fspath(path)
        if not isinstance(fspath, str):
            raise TypeError(f"path must be a str or os.PathLike[str], got {type(fspath).__name__}")
        if not isinstance(mode, str):
            raise TypeError(f"mode must be a str, got {type(mode).__name__}")
        try:
            fspath.encode("utf-8")
        except UnicodeEncodeError:
            fspath = "\0"  # a lone surrogate (a non-UTF-8 file name): refused with NUL below
        if "\0" in fspath:
            raise ConfigurationError("a cassette's path must be UTF-8 text without NUL characters")
        self._core = CoreCassette(fspath, mode)

    @property
    def path(self) -> str:
        return str(self._core.path)

    @property
    def mode(self) -> str:
        """``"record"`` or ``"replay"``: what this cassette does (``"once"`` has been decided)."""
        return str(self._core.mode)

    @property
    def base_url(self) -> str | None:
        """The base URL of the client that recorded the file (``None`` before recording)."""
        return self._core.base_url

    @property
    def client_id(self) -> str | None:
        """The client id of the client that recorded the file (``None`` before recording)."""
        return self._core.client_id

    @property
    def recorded(self) -> int:
        """How many exchanges the cassette holds."""
        return int(self._core.counts()[0])

    @property
    def played(self) -> int:
        """How many of them have been recorded or replayed by this cassette object."""
        return int(self._core.counts()[1])

    def save(self) -> None:
        """Writes the file now (a recording cassette); closing its client does this too."""
        self._core.save()

    def client(self, client_secret: str = "fxpay-scrubbed-client-secret-1", **kwargs: Any) -> Client:
        """In replay, a client like the one that recorded the file (base URL and client id)."""
        if self.base_url is None or self.client_id is None:
            raise ConfigurationError(f"the cassette {self.path} names no recording client")
        return Client(self.client_id, client_secret, base_url=self.base_url, cassette=self, **kwargs)

    def __repr__(self) -> str:
        return f"Cassette(path={self.path!r}, mode={self.mode!r})"
