"""stagedrain's Python client: stage Celery tasks as rows of staged_jobs, in the app's transaction."""
from stagedrain.errors import NotMigrated, NotStageable, StagedrainError

__all__ = ["NotMigrated", "NotStageable", "StagedrainError"]
__version__ = "0.1.0"
