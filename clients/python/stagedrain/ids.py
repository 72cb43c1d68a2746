"""Job ids generated in the app, so they are known without reading the row back."""
import secrets


def new_jid():
    """A Sidekiq-style jid (24 lowercase hex digits), as the column's default would draw."""
    return secrets.token_hex(12)
