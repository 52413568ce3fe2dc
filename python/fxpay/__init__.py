"""fxpay: a fast, exact client for a foreign-exchange payments and account-information service.

Money is ``decimal.Decimal``, never float. Every network call has an ``*_async`` twin.
``fxpay.testing.Sandbox`` runs a stateful emulator of the whole service on loopback.
"""

# The compiled core's classes are there at once; everything written in Python (the errors,
# journals, token stores, raw responses, payouts, webhooks) is imported on first use
# (PEP 562, `__getattr__` below), so `import fxpay` loads neither `typing` nor `threading`,
# `datetime` or `re`: a fresh process that makes one call starts that much sooner
# (bench/run.py's cold start). `fxpay.ApiError is fxpay.errors.ApiError` as before.
from ._fxpay import (
    Address,
    AuthorizationRequest,
    BankDetails,
    Beneficiary,
    Client,
    Deal,
    DealBeneficiary,
    DealCreated,
    FieldError,
    Freebies,
    JournalEntry,
    Quote,
    RateLimit,
    SpotDeal,
    Token,
    UserSession,
    VirtualAccount,
)
from ._fxpay import __version__ as __version__

# `typing.TYPE_CHECKING` without importing `typing` (mypy and pyright read the name).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from . import contrib as contrib
    from . import errors as errors
    from . import journals as journals
    from . import models as models
    from . import postgres_journal as postgres_journal
    from . import redis_store as redis_store
    from . import sandbox as sandbox
    from . import seen as seen
    from . import stores as stores
    from . import testing as testing
    from . import webhooks as webhooks
    from ._payouts import PayoutProgress
    from ._raw import RawResponse
    from .errors import (
        ApiError,
        AuthenticationError,
        BadRequestError,
        ConfigurationError,
        FxPayError,
        IdempotencyError,
        InProgressError,
        InvalidRequestError,
        JournalError,
        KeyReusedError,
        NotFoundError,
        OAuthError,
        OutcomeUnknownError,
        PaginationError,
        PermissionDeniedError,
        RateLimitError,
        ServerError,
        StateMismatchError,
        TimeoutError,
        TransportError,
        WebhookError,
        WebhookPayloadError,
        WebhookVerificationError,
    )
    from .journals import (
        Journal,
        MemoryJournal,
        RedisJournal,
        SqliteJournal,
        settle_deal_created,
    )
    from .journals.postgres import PostgresJournal
    from .models import to_records
    from .redis_store import RedisTokenStore
    from .stores import MemoryTokenStore, TokenStore
    from .webhooks import parse_deal_created

__all__ = [
    "Address",
    "ApiError",
    "AuthenticationError",
    "AuthorizationRequest",
    "BadRequestError",
    "BankDetails",
    "Beneficiary",
    "Client",
    "ConfigurationError",
    "Deal",
    "DealBeneficiary",
    "DealCreated",
    "FieldError",
    "Freebies",
    "FxPayError",
    "IdempotencyError",
    "InProgressError",
    "InvalidRequestError",
    "Journal",
    "JournalEntry",
    "JournalError",
    "KeyReusedError",
    "MemoryJournal",
    "MemoryTokenStore",
    "NotFoundError",
    "OAuthError",
    "OutcomeUnknownError",
    "PaginationError",
    "PayoutProgress",
    "PermissionDeniedError",
    "PostgresJournal",
    "Quote",
    "RateLimit",
    "RateLimitError",
    "RawResponse",
    "RedisJournal",
    "RedisTokenStore",
    "ServerError",
    "SpotDeal",
    "SqliteJournal",
    "StateMismatchError",
    "TimeoutError",
    "Token",
    "TokenStore",
    "TransportError",
    "UserSession",
    "VirtualAccount",
    "WebhookError",
    "WebhookPayloadError",
    "WebhookVerificationError",
    "parse_deal_created",
    "settle_deal_created",
    "to_records",
]

# The public submodules, imported on first use as attributes too.
_SUBMODULES = frozenset(
    {"contrib", "errors", "journals", "models", "postgres_journal", "redis_store", "sandbox", "seen", "stores", "testing", "webhooks"}
)

# Which module defines each name imported on first use.
_LAZY: dict[str, str] = {
    "PayoutProgress": "._payouts",
    "RawResponse": "._raw",
    "ApiError": ".errors",
    "AuthenticationError": ".errors",
    "BadRequestError": ".errors",
    "ConfigurationError": ".errors",
    "FxPayError": ".errors",
    "IdempotencyError": ".errors",
    "InProgressError": ".errors",
    "InvalidRequestError": ".errors",
    "JournalError": ".errors",
    "KeyReusedError": ".errors",
    "NotFoundError": ".errors",
    "OAuthError": ".errors",
    "OutcomeUnknownError": ".errors",
    "PaginationError": ".errors",
    "PermissionDeniedError": ".errors",
    "RateLimitError": ".errors",
    "ServerError": ".errors",
    "StateMismatchError": ".errors",
    "TimeoutError": ".errors",
    "TransportError": ".errors",
    "WebhookError": ".errors",
    "WebhookPayloadError": ".errors",
    "WebhookVerificationError": ".errors",
    "Journal": ".journals",
    "MemoryJournal": ".journals",
    "RedisJournal": ".journals",
    "SqliteJournal": ".journals",
    "to_records": ".models",
    "PostgresJournal": ".journals.postgres",
    "RedisTokenStore": ".redis_store",
    "MemoryTokenStore": ".stores",
    "TokenStore": ".stores",
    "parse_deal_created": ".webhooks",
    "settle_deal_created": ".journals",
}

if not TYPE_CHECKING:  # type checkers see the imports above, not a catch-all `__getattr__`

    def __getattr__(name: str) -> object:
        import importlib

        if name in _SUBMODULES:  # `fxpay.errors` without `import fxpay.errors` first
            return importlib.import_module(f".{name}", __name__)
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'fxpay' has no attribute {name!r}")
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__) | _SUBMODULES)
