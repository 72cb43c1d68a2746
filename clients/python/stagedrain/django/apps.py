"""The app's configuration; its label is "stagedrain", since "django" is Django's own."""
from django.apps import AppConfig


class StagedrainConfig(AppConfig):
    name = "stagedrain.django"
    label = "stagedrain"
    verbose_name = "stagedrain"
    default_auto_field = "django.db.models.BigAutoField"
