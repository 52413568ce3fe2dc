"""The reader's Django project (a stand-in): settings and urls as docs/testing.md uses them."""
