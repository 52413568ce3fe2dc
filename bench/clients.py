"""How each client of the benchmark is driven: the one place that knows the clients' APIs.

Every client does the same work: one client-credentials token, then ``GET
/v1/payments/quotes/<id>`` with the bearer token, each answer turned into exact ``Decimal``s
(baselines: ``json.loads(body, parse_float=Decimal)`` into a small frozen dataclass; fxpay:
``client.get_quote(id)``, an ``fxpay.Quote``).

A client is opened on a :class:`Target` (the sandbox's address, credentials, quote and, for
https, its CA file) with a protocol (``"http/1.1"`` or ``"h2"``):

- a blocking client is a context manager that yields ``make_get()``: each call gives a
  callable for one thread (the same one for clients that are thread-safe, a new
  ``requests.Session`` each for requests);
- an async client is an async context manager that yields ``aget()``, one awaited call.

Opening a client authenticates and makes one call, and checks the HTTP version the server
answered with where the client can tell. The shapes (loop, threads, tasks) and the timing are
``bench/measure.py``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

Get = Callable[[], object]
AGet = Callable[[], Awaitable[object]]
MakeGet = Callable[[], Get]

# -- the baselines' model: a small frozen dataclass of exact values ----------------------------


@dataclass(frozen=True)
class BFreebies:
    total: Decimal | int
    claimed: Decimal | int
    remaining: Decimal | int


@dataclass(frozen=True)
class BQuote:
    id: str
    buy_currency: str
    buy_amount: Decimal
    sell_currency: str
    sell_amount: Decimal
    customer_rate: Decimal
    inverse_customer_rate: Decimal
    fee: Decimal
    fee_currency: str
    freebies: BFreebies

    @classmethod
    def from_body(cls, body: bytes | str) -> BQuote:
        d = json.loads(body, parse_float=Decimal)
        f = d["freebies"]
        return cls(
            d["id"],
            d["buyCurrency"],
            Decimal(d["buyAmount"]),
            d["sellCurrency"],
            Decimal(d["sellAmount"]),
            Decimal(d["customerRate"]),
            Decimal(d["inverseCustomerRate"]),
            Decimal(d["fee"]),
            d["feeCurrency"],
            BFreebies(f["total"], f["claimed"], f["remaining"]),
        )


# -- the target ---------------------------------------------------------------------------------


@dataclass
class Target:
    base_url: str
    client_id: str
    client_secret: str
    quote_id: str = ""
    ca_bundle: str | None = None  # the sandbox's CA file (PEM) when it serves https

    @property
    def tls(self) -> bool:
        return self.base_url.startswith("https://")

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/v1/oauth/token"

    @property
    def quote_url(self) -> str:
        return f"{self.base_url}/v1/payments/quotes/{self.quote_id}"

    def form(self) -> dict[str, str]:
        return {
            "grant_type": "client_credentials",
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "scope": "payments",
        }

    def ssl_context(self) -> ssl.SSLContext:
        """The system's trust store plus the sandbox's CA (for httpx and aiohttp)."""
        ctx = ssl.create_default_context()
        if self.ca_bundle:
            ctx.load_verify_locations(cafile=self.ca_bundle)
        return ctx

    def ca_pem(self) -> bytes:
        if not self.ca_bundle:
            raise RuntimeError("an https target needs its CA file")
        with open(self.ca_bundle, "rb") as f:
            return f.read()


class WrongProtocol(RuntimeError):
    """The server answered with another HTTP version than the cell is meant to measure."""


def _check(status: int) -> None:
    if status != 200:
        raise RuntimeError(f"GET answered HTTP {status}")


def _expect(version: str, protocol: str) -> None:
    want = "HTTP/2" if protocol == "h2" else "HTTP/1.1"
    if not version.upper().startswith(want):
        raise WrongProtocol(f"answered with {version}, expected {want}")


# -- the clients --------------------------------------------------------------------------------


@contextlib.contextmanager
def fxpay_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    # fxpay (reqwest) offers h2 and http/1.1 by ALPN and has no setting for it: the sandbox
    # decides (the "https" one offers only HTTP/1.1, the "h2" one both).
    import fxpay

    with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as c:
        qid = t.quote_id

        def get() -> object:
            return c.get_quote(qid)

        get()  # the token and the first connection
        yield lambda: get


@contextlib.asynccontextmanager
async def fxpay_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    import fxpay

    async with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as c:
        qid = t.quote_id

        def aget() -> Awaitable[object]:
            return c.get_quote_async(qid)

        await aget()
        yield aget


# fxpay's Quote builds its fields' Python values (str, Decimal, the Freebies) on first read, and
# the cells above read none, while every peer's cell builds its whole model (BQuote: json.loads
# and a dataclass). The cells below read every attribute of the Quote that _fxpay.pyi lists,
# ``raw`` (the answer's JSON as a dict) included, and the three fields of its Freebies: at
# least the work a peer's cell does (issue 56 item 4).


def read_every_field(q: Any) -> object:
    """Every attribute of an ``fxpay.Quote`` (python/fxpay/_fxpay.pyi), and its Freebies' fields."""
    f = q.freebies
    return (
        q.id,
        q.buy_currency,
        q.buy_amount,
        q.sell_currency,
        q.sell_amount,
        q.customer_rate,
        q.inverse_customer_rate,
        q.fee,
        q.fee_currency,
        q.raw,
        None if f is None else (f.total, f.claimed, f.remaining),
    )


@contextlib.contextmanager
def fxpay_fields_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    import fxpay

    with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as c:
        qid = t.quote_id

        def get() -> object:
            return read_every_field(c.get_quote(qid))

        get()
        yield lambda: get


@contextlib.asynccontextmanager
async def fxpay_fields_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    import fxpay

    async with fxpay.Client(t.client_id, t.client_secret, base_url=t.base_url, ca_bundle=t.ca_bundle) as c:
        qid = t.quote_id

        async def aget() -> object:
            return read_every_field(await c.get_quote_async(qid))

        await aget()
        yield aget


def _httpx_kwargs(t: Target, protocol: str) -> dict[str, Any]:
    kw: dict[str, Any] = {"http2": protocol == "h2"}
    if os.environ.get("FXPAY_BENCH_UNDER_VALGRIND"):
        # bench/instructions.py: 50 times slower under callgrind, 64 tasks opening their
        # connections at once outlast httpx's 5 s default timeout (ConnectTimeout).
        kw["timeout"] = None
    if t.tls:
        kw["verify"] = t.ssl_context()
    return kw


@contextlib.contextmanager
def httpx_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    import httpx

    with httpx.Client(**_httpx_kwargs(t, protocol)) as c:
        r = c.post(t.token_url, data=t.form())
        r.raise_for_status()
        headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
        url = t.quote_url

        def get() -> object:
            r = c.get(url, headers=headers)
            _check(r.status_code)
            return BQuote.from_body(r.content)

        r = c.get(url, headers=headers)
        _check(r.status_code)
        _expect(r.http_version, protocol)
        yield lambda: get


@contextlib.asynccontextmanager
async def httpx_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    import httpx

    async with httpx.AsyncClient(**_httpx_kwargs(t, protocol)) as c:
        r = await c.post(t.token_url, data=t.form())
        r.raise_for_status()
        headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
        url = t.quote_url

        async def aget() -> object:
            r = await c.get(url, headers=headers)
            _check(r.status_code)
            return BQuote.from_body(r.content)

        r = await c.get(url, headers=headers)
        _check(r.status_code)
        _expect(r.http_version, protocol)
        yield aget


@contextlib.contextmanager
def requests_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    import requests

    verify: bool | str = t.ca_bundle if t.tls and t.ca_bundle else True
    with requests.Session() as auth:
        r = auth.post(t.token_url, data=t.form(), verify=verify)
        r.raise_for_status()
        headers = {"Authorization": f"Bearer {r.json()['access_token']}"}
    url = t.quote_url
    sessions: list[requests.Session] = []

    def make_get() -> Get:
        s = requests.Session()  # one session per thread: Session is not thread-safe
        s.headers.update(headers)
        s.verify = verify
        sessions.append(s)

        def get() -> object:
            r = s.get(url, verify=verify)  # per request: REQUESTS_CA_BUNDLE would override the session's
            _check(r.status_code)
            return BQuote.from_body(r.content)

        get()
        return get

    try:
        yield make_get
    finally:
        for s in sessions:
            s.close()


@contextlib.asynccontextmanager
async def aiohttp_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    import aiohttp

    ssl_arg: ssl.SSLContext | bool = t.ssl_context() if t.tls else True
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=100, ssl=ssl_arg)) as s:
        async with s.post(t.token_url, data=t.form()) as r:
            r.raise_for_status()
            token = (await r.json())["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        url = t.quote_url

        async def aget() -> object:
            async with s.get(url, headers=headers) as r:
                _check(r.status)
                return BQuote.from_body(await r.read())

        await aget()
        yield aget


def _pyreqwest_builder(builder: Any, t: Target, protocol: str) -> Any:
    if t.tls:
        builder = builder.add_root_certificate_pem(t.ca_pem())
    # pyreqwest speaks HTTP/1.1 only unless told otherwise; with http2(True) it offers h2 by ALPN.
    return builder.http2(True) if protocol == "h2" else builder.http1_only()


def _form_body(t: Target) -> str:
    return urlencode(t.form())


@contextlib.contextmanager
def pyreqwest_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    from pyreqwest.client import SyncClientBuilder

    with _pyreqwest_builder(SyncClientBuilder(), t, protocol).build() as c:
        r = c.post(t.token_url).header("Content-Type", "application/x-www-form-urlencoded").body_text(_form_body(t)).build().send()
        _check(r.status)
        auth = f"Bearer {json.loads(r.text())['access_token']}"
        url = t.quote_url

        def get() -> object:
            r = c.get(url).header("Authorization", auth).build().send()
            _check(r.status)
            return BQuote.from_body(r.text())

        r = c.get(url).header("Authorization", auth).build().send()
        _check(r.status)
        _expect(r.version, protocol)
        yield lambda: get


@contextlib.asynccontextmanager
async def pyreqwest_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    from pyreqwest.client import ClientBuilder

    async with _pyreqwest_builder(ClientBuilder(), t, protocol).build() as c:
        r = await c.post(t.token_url).header("Content-Type", "application/x-www-form-urlencoded").body_text(_form_body(t)).build().send()
        _check(r.status)
        auth = f"Bearer {json.loads(await r.text())['access_token']}"
        url = t.quote_url

        async def aget() -> object:
            r = await c.get(url).header("Authorization", auth).build().send()
            _check(r.status)
            return BQuote.from_body(await r.text())

        r = await c.get(url).header("Authorization", auth).build().send()
        _check(r.status)
        _expect(r.version, protocol)
        yield aget


def _wreq_kwargs(t: Target, protocol: str) -> dict[str, Any]:
    """wreq (BoringSSL): the system's trust store plus the sandbox's CA, as httpx's and
    pyreqwest's settings give; HTTP/1.1 only for the http/1.1 cells, h2 and HTTP/1.1 offered
    by ALPN (its default) for the h2 cells. Its runtime and pool: the defaults."""
    import wreq

    kw: dict[str, Any] = {}
    if t.tls:
        kw["tls_verify"] = wreq.CertStore(pem_certs=[t.ca_pem().decode()], default_paths=True)
    if protocol != "h2":
        kw["http1_only"] = True
    return kw


def _wreq_version(version: object, protocol: str) -> None:
    import wreq

    names = [(wreq.Version.HTTP_11, "HTTP/1.1"), (wreq.Version.HTTP_2, "HTTP/2")]  # not hashable
    _expect(next((n for v, n in names if version == v), str(version)), protocol)


@contextlib.contextmanager
def wreq_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    from wreq.blocking import Client as WreqSyncClient

    c = WreqSyncClient(**_wreq_kwargs(t, protocol))
    try:
        with c.post(t.token_url, form=t.form()) as r:
            _check(r.status.as_int())
            headers = {"Authorization": f"Bearer {json.loads(r.text())['access_token']}"}
        url = t.quote_url

        def get() -> object:
            with c.get(url, headers=headers) as r:
                _check(r.status.as_int())
                return BQuote.from_body(r.text())

        with c.get(url, headers=headers) as r:
            _check(r.status.as_int())
            _wreq_version(r.version, protocol)
            BQuote.from_body(r.text())
        yield lambda: get
    finally:
        c.close()


@contextlib.asynccontextmanager
async def wreq_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    import wreq

    c = wreq.Client(**_wreq_kwargs(t, protocol))
    try:
        async with c.post(t.token_url, form=t.form()) as r:
            _check(r.status.as_int())
            headers = {"Authorization": f"Bearer {json.loads(await r.text())['access_token']}"}
        url = t.quote_url

        async def aget() -> object:
            async with c.get(url, headers=headers) as r:
                _check(r.status.as_int())
                return BQuote.from_body(await r.text())

        async with c.get(url, headers=headers) as r:
            _check(r.status.as_int())
            _wreq_version(r.version, protocol)
            BQuote.from_body(await r.text())
        yield aget
    finally:
        c.close()


def _pyqwest_kwargs(t: Target, protocol: str) -> dict[str, Any]:
    """pyqwest (reqwest on rustls): the system's trust store plus the sandbox's CA; HTTP/1.1
    for the http/1.1 cells, ALPN (its default, h2 first) for the h2 cells. Two settings differ
    from its defaults, so that it does the same work as the others: no OpenTelemetry
    instrumentation of its own (``enable_otel``: fxpay and the others make no spans without a
    tracer provider), and idle connections kept for all 64 tasks (``pool_max_idle_per_host``
    defaults to 2: the async-64 http/1.1 cells would open new connections, TLS handshakes
    included, all the time; aiohttp's pool here holds 100)."""
    import pyqwest

    kw: dict[str, Any] = {"enable_otel": False, "pool_max_idle_per_host": 100}
    if t.tls:
        kw["tls_ca_cert"] = t.ca_pem()
        kw["tls_include_system_certs"] = True
    if protocol != "h2":
        kw["http_version"] = pyqwest.HTTPVersion.HTTP1
    return kw


def _pyqwest_version(version: object, protocol: str) -> None:
    import pyqwest

    names = [(pyqwest.HTTPVersion.HTTP1, "HTTP/1.1"), (pyqwest.HTTPVersion.HTTP2, "HTTP/2")]  # not hashable
    _expect(next((n for v, n in names if version == v), str(version)), protocol)


_FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@contextlib.contextmanager
def pyqwest_blocking(t: Target, protocol: str) -> Iterator[MakeGet]:
    from pyqwest import SyncClient, SyncHTTPTransport

    with SyncHTTPTransport(**_pyqwest_kwargs(t, protocol)) as transport:
        c = SyncClient(transport)
        r = c.post(t.token_url, _FORM, _form_body(t).encode())
        _check(r.status)
        headers = {"Authorization": f"Bearer {json.loads(r.content)['access_token']}"}
        url = t.quote_url

        def get() -> object:
            r = c.get(url, headers)
            _check(r.status)
            return BQuote.from_body(r.content)

        # The buffered answer of get() does not carry the HTTP version; a streamed one does.
        with c.stream("GET", url, headers) as s:
            _check(s.status)
            _pyqwest_version(s.http_version, protocol)
            BQuote.from_body(b"".join(bytes(b) for b in s.content))
        yield lambda: get


@contextlib.asynccontextmanager
async def pyqwest_async(t: Target, protocol: str) -> AsyncIterator[AGet]:
    from pyqwest import Client as PyqwestClient
    from pyqwest import HTTPTransport

    async with HTTPTransport(**_pyqwest_kwargs(t, protocol)) as transport:
        c = PyqwestClient(transport)
        r = await c.post(t.token_url, _FORM, _form_body(t).encode())
        _check(r.status)
        headers = {"Authorization": f"Bearer {json.loads(r.content)['access_token']}"}
        url = t.quote_url

        async def aget() -> object:
            r = await c.get(url, headers)
            _check(r.status)
            return BQuote.from_body(r.content)

        async with c.stream("GET", url, headers) as s:
            _check(s.status)
            _pyqwest_version(s.http_version, protocol)
            BQuote.from_body(b"".join([bytes(b) async for b in s.content]))
        yield aget


# -- the cells ----------------------------------------------------------------------------------

THREADS = 8
TASKS = 64

# Shapes: a blocking loop; THREADS threads sharing the same total; asyncio with TASKS tasks.
SHAPES = ["loop", f"{THREADS} threads", f"async {TASKS}"]
# Transports: plain http (HTTP/1.1); https from a sandbox that offers only HTTP/1.1 by ALPN;
# https from a sandbox that offers h2 and HTTP/1.1 (the h2 cells: clients that opt into h2).
TRANSPORTS = ["http", "https", "h2"]
TRANSPORT_LABEL = {"http": "plain http/1.1", "https": "TLS http/1.1", "h2": "TLS h2"}


# The two kinds of fxpay cell. ``fxpay`` (the key of every earlier result, its meaning unchanged):
# ``get_quote`` with no field of the Quote read, so its fields' values are never built; the
# tables label it LABEL["fxpay"]. ``fxpay (every field read)``: the same call, then every
# field read, as the peers' cells build their model.
FXPAY_FIELDS = "fxpay (every field read)"
FXPAY_CLIENTS = ("fxpay", FXPAY_FIELDS)
LABEL = {"fxpay": "fxpay (lazy, no field read)"}


def label(name: str) -> str:
    """A client's name in the tables: the lazy fxpay cells say they are."""
    return LABEL.get(name, name)


@dataclass(frozen=True)
class Client:
    name: str
    module: str  # what must be importable
    blocking: Callable[[Target, str], contextlib.AbstractContextManager[MakeGet]] | None
    asynchronous: Callable[[Target, str], contextlib.AbstractAsyncContextManager[AGet]] | None
    shapes: tuple[str, ...]
    transports: tuple[str, ...]


CLIENTS = [
    Client("fxpay", "fxpay", fxpay_blocking, fxpay_async, tuple(SHAPES), ("http", "https", "h2")),
    Client(FXPAY_FIELDS, "fxpay", fxpay_fields_blocking, fxpay_fields_async, tuple(SHAPES), ("http", "https", "h2")),
    Client("httpx.Client", "httpx", httpx_blocking, None, ("loop", "8 threads"), ("http", "https", "h2")),
    Client("httpx.AsyncClient", "httpx", None, httpx_async, ("async 64",), ("http", "https", "h2")),
    Client("requests.Session", "requests", requests_blocking, None, ("loop", "8 threads"), ("http", "https")),
    Client("aiohttp", "aiohttp", None, aiohttp_async, ("async 64",), ("http", "https")),
    Client("pyreqwest", "pyreqwest", pyreqwest_blocking, pyreqwest_async, tuple(SHAPES), ("http", "https", "h2")),
    Client("wreq", "wreq", wreq_blocking, wreq_async, tuple(SHAPES), ("http", "https", "h2")),
    Client("pyqwest", "pyqwest", pyqwest_blocking, pyqwest_async, tuple(SHAPES), ("http", "https", "h2")),
]
CEILING = "pure-Rust reqwest (ceiling)"


@dataclass(frozen=True)
class Cell:
    client: Client
    shape: str
    transport: str

    @property
    def key(self) -> str:
        """``client / shape`` for plain http (the names of earlier results), else ``client / shape / transport``."""
        base = f"{self.client.name} / {self.shape}"
        return base if self.transport == "http" else f"{base} / {self.transport}"

    @property
    def protocol(self) -> str:
        return "h2" if self.transport == "h2" else "http/1.1"


CELLS = [Cell(c, s, tr) for tr in TRANSPORTS for s in SHAPES for c in CLIENTS if s in c.shapes and tr in c.transports]


def key(client: str, shape: str, transport: str = "http") -> str:
    base = f"{client} / {shape}"
    return base if transport == "http" else f"{base} / {transport}"


# -- cold start: one fresh process's first call -------------------------------------------------

# Run with ``python -c``; argv: base_url, client_id, secret, quote_id, ca_bundle. Each prints one
# JSON line: the seconds from before its import to its first answered GET (``total``: the TLS
# handshake, the token, the GET), and where they went (``import``, ``client``: constructing the
# client, ``first_call``).
COLD = {
    "fxpay": """
import sys, time, json
t0 = time.perf_counter()
import fxpay
t1 = time.perf_counter()
base, cid, secret, qid, ca = sys.argv[1:6]
with fxpay.Client(cid, secret, base_url=base, ca_bundle=ca) as c:
    t2 = time.perf_counter()
    c.get_quote(qid)
    t3 = time.perf_counter()
    print(json.dumps({"total": t3 - t0, "import": t1 - t0, "client": t2 - t1, "first_call": t3 - t2}))
""",
    "httpx": """
import sys, time, json
t0 = time.perf_counter()
import httpx, ssl
t1 = time.perf_counter()
base, cid, secret, qid, ca = sys.argv[1:6]
with httpx.Client(verify=ssl.create_default_context(cafile=ca)) as c:
    t2 = time.perf_counter()
    r = c.post(base + "/v1/oauth/token", data={"grant_type": "client_credentials", "client_id": cid,
               "client_secret": secret, "scope": "payments"})
    r.raise_for_status()
    r = c.get(f"{base}/v1/payments/quotes/{qid}", headers={"Authorization": "Bearer " + r.json()["access_token"]})
    r.raise_for_status()
    t3 = time.perf_counter()
    print(json.dumps({"total": t3 - t0, "import": t1 - t0, "client": t2 - t1, "first_call": t3 - t2}))
""",
    "pyreqwest": """
import sys, time, json
t0 = time.perf_counter()
from urllib.parse import urlencode
from pyreqwest.client import SyncClientBuilder
t1 = time.perf_counter()
base, cid, secret, qid, ca = sys.argv[1:6]
with SyncClientBuilder().add_root_certificate_pem(open(ca, "rb").read()).build() as c:
    t2 = time.perf_counter()
    form = urlencode({"grant_type": "client_credentials", "client_id": cid, "client_secret": secret, "scope": "payments"})
    r = c.post(base + "/v1/oauth/token").header("Content-Type", "application/x-www-form-urlencoded").body_text(form).build().send()
    assert r.status == 200, r.status
    auth = "Bearer " + json.loads(r.text())["access_token"]
    r = c.get(f"{base}/v1/payments/quotes/{qid}").header("Authorization", auth).build().send()
    assert r.status == 200, r.status
    t3 = time.perf_counter()
    print(json.dumps({"total": t3 - t0, "import": t1 - t0, "client": t2 - t1, "first_call": t3 - t2}))
""",
    # wreq trusts the sandbox's CA alone here, as fxpay's ``ca_bundle=`` does: with the
    # system's store as well (its cells' setting) its client took 11 ms more to construct on
    # this host (median of 7: 25.9 against 13.2 ms in all), which would flatter fxpay.
    # h2 and HTTP/1.1 offered by ALPN (its default); the h2 answer is checked.
    "wreq": """
import sys, time, json
t0 = time.perf_counter()
import wreq
from wreq.blocking import Client
t1 = time.perf_counter()
base, cid, secret, qid, ca = sys.argv[1:6]
c = Client(tls_verify=wreq.CertStore(pem_certs=[open(ca).read()]))
t2 = time.perf_counter()
form = {"grant_type": "client_credentials", "client_id": cid, "client_secret": secret, "scope": "payments"}
with c.post(base + "/v1/oauth/token", form=form) as r:
    assert r.status.as_int() == 200, r.status
    auth = "Bearer " + json.loads(r.text())["access_token"]
with c.get(f"{base}/v1/payments/quotes/{qid}", headers={"Authorization": auth}) as r:
    assert r.status.as_int() == 200, r.status
    assert r.version == wreq.Version.HTTP_2, r.version
    r.text()
t3 = time.perf_counter()
print(json.dumps({"total": t3 - t0, "import": t1 - t0, "client": t2 - t1, "first_call": t3 - t2}))
""",
}
