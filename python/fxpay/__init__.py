"""fxpay: a fast, exact client for a foreign-exchange payments and account-information service.

Money is ``decimal.Decimal``, never float. Every network call has an ``*_async`` twin.
``fxpay.testing.Sandbox`` runs a stateful emulator of the whole service on loopback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _fxpay
from ._fxpay import Client, UserSession
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
from .journals import Journal, JournalEntry, MemoryJournal, RedisJournal, SqliteJournal
from .models import (
    Address,
    AuthorizationRequest,
    BankDetails,
    Beneficiary,
    Deal,
    DealBeneficiary,
    DealCreated,
    FieldError,
    Freebies,
    Quote,
    SpotDeal,
    Token,
    VirtualAccount,
    to_records,
)
from .redis_store import RedisTokenStore
from .stores import MemoryTokenStore, TokenStore
from .webhooks import parse_deal_created

if TYPE_CHECKING:
    # `fxpay.testing` is a submodule attribute for type checkers; at run time `__getattr__`
    # below imports it on first use.
    from . import testing as testing

__version__: str = _fxpay.__version__

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
    "Quote",
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
    "to_records",
]


def __getattr__(name: str) -> object:
    # `fxpay.testing` without importing it first (it is imported on first use, so
    # `import fxpay` stays light).
    if name == "testing":
        import importlib

        return importlib.import_module(".testing", __name__)
    raise AttributeError(f"module 'fxpay' has no attribute {name!r}")
