"""The app's own test suite, run by `manage.py test`: its test database gets
staged_jobs from stagedrain's Django migration, so staging works in tests."""
from django.db import transaction
from django.test import TestCase

from shop.tasks import note
from stagedrain.django.models import StagedJob


class StagingTest(TestCase):
    def test_delay_in_a_transaction_stages_a_row(self):
        with transaction.atomic():
            result = note.delay("from a test")
        job = StagedJob.objects.get(uuid=result.id)
        self.assertEqual((job.job_class, job.queue, job.args[0]), ("shop.tasks.note", "celery", ["from a test"]))

    def test_a_rolled_back_transaction_stages_nothing(self):
        try:
            with transaction.atomic():
                note.delay("rolled back")
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        self.assertEqual(StagedJob.objects.count(), 0)
