"""A Django receiver of the ``DealCreated`` notification.

.. code-block:: python

    urlpatterns = [path("fxpay/deal-created", deal_created_view(nonce_for=lookup, on_event=handle))]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ..journals import Journal
from ..seen import SeenSet
from . import receiver

__all__ = ["deal_created_view"]


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    """Calls ``fn`` from a sync view, awaiting (with ``async_to_sync``) what it returns if that
    is awaitable: a coroutine function's coroutine, or the awaitable of a plain callable (an
    object whose ``__call__`` is a coroutine function, a lambda around one)."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = async_to_sync(_await)(result)
    return result


def deal_created_view(
    *,
    nonce: str | None = None,
    nonce_for: Callable[[str], Any] | None = None,
    nonce_for_ref: Callable[[str], Any] | None = None,
    on_event: Callable[..., Any],
    ref_param: str = "ref",
    seen: SeenSet | None = None,
    journal: Journal | None = None,
) -> Callable[[HttpRequest], JsonResponse]:
    """A view (CSRF-exempt, POST only: anything else gets 405) that receives ``DealCreated``.

    Give ``journal`` alone (below), or exactly one of ``nonce`` (one nonce for every notification), ``nonce_for``
    (called with the event's ``processId``, returns the ``callback_nonce`` stored with that
    ``SpotDeal``, or ``None`` when the process is unknown) and ``nonce_for_ref`` (called
    with the ``ref_param`` query parameter of the callback URL, a reference the application
    chose and stored with its nonce *before* ``create_spot_deal``: the race-free pattern).
    ``on_event`` receives each verified event, and with ``nonce_for_ref`` the reference too:
    ``on_event(event, ref)``. Coroutine functions are run with ``async_to_sync``, and so is
    an awaitable that a plain callable returns.

    With ``journal`` (the client's :class:`fxpay.Journal`) and none of ``nonce``,
    ``nonce_for`` and ``nonce_for_ref``, each notification is verified against the callback
    nonces the journal issued to keyed spot deals (a nonce it never issued is a 401), and
    settles its spot deal's key, whatever state it is in: ``done`` (``result`` the
    ``processId``, ``deal_id`` set) on success, ``released`` on failure. A spot deal whose
    answer was lost (``OutcomeUnknownError``) so settles itself, and a later call with its key
    returns the ``SpotDeal`` without sending. The journal failing answers 503 with
    ``Retry-After``, so the sender delivers again. With ``journal`` and a nonce setting, each
    verified successful event's ``dealId`` is recorded on its spot deal's entry
    (``journal.get(key).deal_id``).

    ``on_event`` runs at most once per ``processId`` (``seen``: a :class:`fxpay.seen.SeenSet`,
    a :class:`fxpay.seen.MemorySeenSet` of this view by default; give every worker the same
    :class:`fxpay.seen.RedisSeenSet` when there are several).

    Answers: 200 ``{"ok": true}`` after ``on_event`` returned, or without calling it when the
    ``processId`` was handled before (``"duplicate": true``); 409 while another delivery of
    it is being handled; 401 when the nonce is missing, wrong or unknown; 400 when the body
    is not a valid event; 503 with ``Retry-After`` when the seen-set is unavailable (it raised:
    Redis down), so the sender backs off; 500 when a lookup or ``on_event`` raised. Failures
    are logged on the ``fxpay.webhooks`` logger and leave the ``processId`` unseen, so the
    sender retries.
    """
    receiver.check_journal(journal)
    conf = receiver.settings(
        nonce=nonce,
        nonce_for=nonce_for,
        nonce_for_ref=nonce_for_ref,
        ref_param=ref_param,
        seen=seen,
        on_event=on_event,
        journal=journal,
    )

    def make(call: receiver.Call) -> Any:
        return _run(call.fn, *call.args)

    @csrf_exempt
    @require_POST
    def receive_deal_created(request: HttpRequest) -> JsonResponse:
        # Continues the sender's trace when a traceparent came (and tracing is on).
        with receiver.traced(request.headers):
            # One byte past the limit is enough for the parser to refuse the body.
            body = request.read(receiver.MAX_BODY_BYTES + 1)
            answer = receiver.drive(receiver.flow(conf, journal, body, request.headers, request.GET), make)
        return JsonResponse(answer[1], status=answer[0], headers=receiver.headers_of(answer))

    return receive_deal_created


# -- the idempotency journal in the project's PostgreSQL ---------------------------------------

# Django's PostgreSQL engines (PostGIS is PostgreSQL too).
_POSTGRES_ENGINES = ("django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis")


def journal(using: str = "default") -> PostgresJournal:
    """A :class:`fxpay.PostgresJournal` in the database ``DATABASES[using]``, on a connection of
    its own (never Django's: a claim is committed before the request is sent, whatever
    ``atomic()`` block the call runs in). Its table comes from the migration of the app
    ``fxpay.contrib.django_journal``. Make it once per process (at import, or in
    ``AppConfig.ready``), not per request. Any engine but PostgreSQL's is a
    :class:`fxpay.ConfigurationError` naming it."""
    if not isinstance(using, str):
        raise TypeError(f"using must be a str, not {type(using).__name__}")
    from typing import cast

    from django.db import connections

    from ..errors import ConfigurationError
    from ..journals.postgres import PostgresJournal, conninfo_of

    # Django's own copy of DATABASES, the test runner's "test_..." NAME included.
    db = cast("dict[str, Any]", connections.settings).get(using)
    if db is None:
        raise ConfigurationError(f"DATABASES has no {using!r} database")
    engine = db.get("ENGINE", "")
    if engine not in _POSTGRES_ENGINES:
        raise ConfigurationError(f"fxpay's journal needs PostgreSQL, and DATABASES[{using!r}] uses {engine!r}: {_ELSEWHERE}")
    params = {
        "dbname": db.get("NAME"),
        "user": db.get("USER"),
        "password": db.get("PASSWORD"),
        "host": db.get("HOST"),
        "port": db.get("PORT"),
    }
    return PostgresJournal(conninfo_of({**params, **db.get("OPTIONS", {})}))


# What a project without PostgreSQL uses instead, said by journal() and by the check below.
_ELSEWHERE = (
    "on one machine, use fxpay.SqliteJournal(path) with a file of its own (not Django's database: "
    "it refuses a file that is not a journal), shared by every process there; across machines, "
    "a PostgreSQL database (a router may send the app fxpay_journal there) or fxpay.RedisJournal"
)


def check_journal_database(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[Any]:
    """The system check of ``fxpay.contrib.django_journal`` (``fxpay_journal.E001``), run by
    ``manage.py migrate`` (and ``check --database``, and the test runner): an error when the
    database being migrated takes the app's migration and no database of the project that
    takes it is PostgreSQL. Such a ``migrate`` would succeed and make nothing (the migration
    makes the table on PostgreSQL only), and :func:`journal` would then refuse every keyed
    call; the check refuses at once, with the reason. A project with a PostgreSQL database
    for the journal migrates its other databases as before."""
    if not databases:
        return []
    from typing import cast

    from django.core import checks
    from django.db import connections, router

    configured = cast("dict[str, dict[str, Any]]", connections.settings)
    takes = [alias for alias in configured if router.allow_migrate(alias, "fxpay_journal")]
    if not any(alias in takes for alias in databases):
        return []
    if any(configured[alias].get("ENGINE") in _POSTGRES_ENGINES for alias in takes):
        return []
    uses = "; ".join(f"DATABASES[{alias!r}] uses {configured[alias].get('ENGINE', '')!r}" for alias in takes)
    return [
        checks.Error(
            f"fxpay.contrib.django_journal keeps the idempotency journal in PostgreSQL, and no database of this "
            f"project that takes its migration is PostgreSQL ({uses}): the migration would make nothing, and "
            "fxpay.contrib.django.journal() would refuse every keyed call.",
            hint=f"Remove 'fxpay.contrib.django_journal' from INSTALLED_APPS and {_ELSEWHERE}.",
            id="fxpay_journal.E001",
        )
    ]


__all__ += ["check_journal_database", "journal"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..journals.postgres import PostgresJournal
