"""The worker's entry point (celery -A stagedrain_test_worker worker), as a Django project's
celery.py is: Django configured first, so what the worker stages itself (retries, link
callbacks, the rest of a chain) goes through its own database connection as the app role."""
import support  # noqa: F401  (configures Django)
from stagedrain_test_app import app  # noqa: F401
