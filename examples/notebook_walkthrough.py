# %% [markdown]
# # fxpay in a notebook
# Cells (`# %%`) run top to bottom in Jupyter, VS Code or as a plain script. Blocking calls
# work inside Jupyter's running event loop; `await client.get_quote_async(...)` works at the
# top level of a cell.

# %%
from __future__ import annotations

from decimal import Decimal

import pandas as pd

import fxpay
from fxpay.testing import Sandbox

sandbox = Sandbox()
client = sandbox.client()

# %% Quotes for a few currency pairs, as exact Decimals
pairs = [("USD", "AUD"), ("USD", "JPY"), ("EUR", "GBP"), ("GBP", "USD")]
quotes = [client.get_quote(client.create_quote(buy_currency=buy, buy_amount="1000", sell_currency=sell)) for buy, sell in pairs]
quotes[0]  # in Jupyter this renders as an HTML table (Quote._repr_html_)

# %% Into pandas without losing a digit
frame = pd.DataFrame(fxpay.to_records(quotes))
print(frame[["buy_currency", "sell_currency", "customer_rate", "sell_amount"]].to_string(index=False))
assert all(isinstance(v, Decimal) for v in frame["sell_amount"])
total_fee = sum(frame["fee"], Decimal(0))
print(f"total fees: {total_fee}")

# %% Clean up
client.close()
sandbox.close()
