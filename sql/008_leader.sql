-- stagedrain 008: what the last leader routed by.
--
-- A leader killed between its push and its commit leaves the rows it pushed
-- staged, and named in the fence of the Redis it pushed them to. Its
-- successor deletes them when it reads that fence; but if the successor
-- routes them elsewhere (a route added or changed across the crash) and that
-- fence cannot be read yet (its Redis is down), it would push them a second
-- time. So each leader records a digest of its targets and rules here, per
-- lock key, and whether it has since settled every target's fence; one that
-- finds another digest than its own, or an unsettled one, holds the rows
-- staged before it led until every target has settled its fence. Safe to
-- apply again.
CREATE TABLE IF NOT EXISTS staged_jobs_leader (
    lock_key bigint PRIMARY KEY,
    routes text NOT NULL,
    settled boolean NOT NULL DEFAULT true,
    since timestamptz NOT NULL DEFAULT now()
);
