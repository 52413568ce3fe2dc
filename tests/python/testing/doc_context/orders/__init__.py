"""The reader's Django app of orders (a stand-in)."""
