
# Appended by the tests to the settings `startproject` wrote: stagedrain's app
# and the database from the environment, as a deployment sets them.
import os  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

INSTALLED_APPS += ["stagedrain.django", "shop"]  # noqa: F821
_url = os.environ["DATABASE_URL"]
if _url.startswith("sqlite://"):
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _url[len("sqlite://"):]}}
else:
    _db = urlsplit(_url)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _db.path[1:],
            "USER": _db.username,
            "PASSWORD": _db.password or "",
            "HOST": _db.hostname,
            "PORT": _db.port or "",
        }
    }
CELERY_BROKER_URL = os.environ.get("REDIS_URL", "redis://")
