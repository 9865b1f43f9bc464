"""An app module that fails while being imported (for the CLI's loading errors)."""

raise RuntimeError("the database URL is not configured")
