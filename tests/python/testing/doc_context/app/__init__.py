"""The reader's application package (a stand-in)."""
