-- stagedrain 004: a UUID per job, fixed when the row is staged, for the
-- formats whose jobs carry one: ActiveJob's job_id, Celery's task id and
-- Laravel's uuid. A job pushed twice carries the same id, so the worker side
-- can tell, and the application can read it back (INSERT ... RETURNING uuid)
-- to look the job up later, as Celery's AsyncResult(id) does. Safe to apply
-- again. Adding a column with a volatile default rewrites the table once:
-- run it while staged_jobs is small, as a drained outbox is.
ALTER TABLE staged_jobs ADD COLUMN IF NOT EXISTS uuid uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE staged_jobs_dead ADD COLUMN IF NOT EXISTS uuid uuid;
