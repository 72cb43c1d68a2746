"""The errors a staging call raises in the app, and the database errors it turns into them."""

# SQLSTATEs of an INSERT into a table that `stagedrain migrate` has not
# created (undefined_table) or not brought up to date (undefined_column).
_NOT_MIGRATED = {"42P01", "42703"}


class StagedrainError(Exception):
    """Base of the errors stagedrain raises."""


class NotMigrated(StagedrainError):
    """staged_jobs, or one of its columns, is missing from this database."""


class NotStageable(StagedrainError, ValueError):
    """The job cannot be a row: its JSON holds NaN or Infinity (not JSON), or nothing names its queue."""


def _pgcode(exc):
    """The SQLSTATE of a psycopg2 error, also when Django or SQLAlchemy wrapped it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        code = getattr(exc, "pgcode", None)
        if code:
            return code
        # SQLAlchemy keeps the driver's error in .orig; Django chains it as __cause__.
        exc = getattr(exc, "orig", None) or exc.__cause__
    return None


def not_migrated(exc):
    """NotMigrated for exc if it says staged_jobs is missing or old, else None."""
    if _pgcode(exc) not in _NOT_MIGRATED:
        return None
    return NotMigrated(
        "staged_jobs is missing or out of date in this database (%s): run `stagedrain migrate` "
        "with --pg-url pointing at it, or Django's `manage.py migrate` with \"stagedrain.django\" in "
        "INSTALLED_APPS (which also gives a test database the table), as the tables' owner; then stage again"
        % str(exc).strip().splitlines()[0]
    )
