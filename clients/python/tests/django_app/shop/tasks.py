"""A task of the app's own; the tests only stage it."""
from celery import shared_task


@shared_task
def note(text):
    with open("ran.txt", "a") as f:
        f.write(text + "\n")
