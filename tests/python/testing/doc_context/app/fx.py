"""docs/deployment.md's ``app/fx.py``, as the page writes it."""

import fxpay

client = fxpay.Client.from_env()  # FXPAY_CLIENT_ID, FXPAY_CLIENT_SECRET, FXPAY_BASE_URL
