-- stagedrain 006: routes (--route): a row may name the target it goes to.
--
-- staged_jobs.route names a route of the relay's (--route NAME ...), for apps
-- that shard by something other than the queue (Sidekiq's per-job pool,
-- Sidekiq::Client.via); NULL lets the route rules pick by queue, so inserts
-- that do not name it keep working. A name no route has is dead-lettered.
-- staged_jobs_held.target is the target a held row waits for (NULL: the
-- default one): a target that is down holds its rows there, in order, while
-- the others flow. Safe to apply again; adding nullable columns without a
-- default does not rewrite the tables.
ALTER TABLE staged_jobs ADD COLUMN IF NOT EXISTS route text;
ALTER TABLE staged_jobs_dead ADD COLUMN IF NOT EXISTS route text;
ALTER TABLE staged_jobs_held ADD COLUMN IF NOT EXISTS route text;
ALTER TABLE staged_jobs_held ADD COLUMN IF NOT EXISTS target text;
CREATE INDEX IF NOT EXISTS staged_jobs_held_target ON staged_jobs_held (target, queue, round, hold_id)
    WHERE target IS NOT NULL;
