# The Celery app loads with Django, as Celery's guide for Django sets it up.
from .celery import app as celery_app

__all__ = ("celery_app",)
