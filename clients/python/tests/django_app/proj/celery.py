"""The project's Celery app, as Celery's guide for Django writes it, plus stagedrain's one line: task_cls."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")
app = Celery("proj", task_cls="stagedrain.celery:StagedTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
