// A typed app's use of the package: it must compile against the shipped .d.ts.
import { StagedQueue, StagedJob, StagedJobError, type StagedJobsOptions, type Queryable } from 'stagedrain/bullmq';
import * as main from 'stagedrain';
import type { Knex } from 'knex';
import type { JobsOptions, DefaultJobOptions } from 'bullmq';

interface Welcome {
  userId: number;
}

declare const client: Queryable;
declare const trx: Knex.Transaction;

// BullMQ's own option types pass as they are.
declare const bullmqDefaults: DefaultJobOptions;
declare const bullmqOpts: JobsOptions;

async function stage(): Promise<string> {
  const emails = new StagedQueue<Welcome, 'welcome' | 'goodbye'>('emails', {
    db: client,
    defaultJobOptions: bullmqDefaults,
    prefix: '{bull}',
  });
  const job: StagedJob<Welcome, 'welcome' | 'goodbye'> = await emails.add('welcome', { userId: 1 }, {
    delay: 1000,
    priority: 2,
    backoff: { type: 'exponential', delay: 500 },
    removeOnComplete: { age: 3600, count: 100 },
    jobId: 'welcome-1',
  });
  const more = await emails.addBulk([{ name: 'goodbye', data: { userId: 2 }, opts: bullmqOpts }]);
  const viaKnex = new main.StagedQueue('reports', { db: trx });
  await viaKnex.add('daily', { any: 'thing' });
  const n: number = job.timestamp + job.delay + job.priority + more.length;
  // @ts-expect-error: a name the queue's type does not list
  await emails.add('other', { userId: 3 });
  // @ts-expect-error: data of the wrong shape
  await emails.add('welcome', { user: 'x' });
  // @ts-expect-error: repeat cannot be staged
  await emails.add('welcome', { userId: 1 }, { repeat: { every: 1000 } });
  // @ts-expect-error: jobId is a string
  await emails.add('welcome', { userId: 1 }, { jobId: 5 });
  // @ts-expect-error: a handle without query() or raw()
  new StagedQueue('q', { db: {} });
  const opts: StagedJobsOptions = { lifo: true, keepLogs: 10 };
  try {
    await emails.add('welcome', { userId: 1 }, opts);
  } catch (err) {
    if (err instanceof StagedJobError) return err.message;
  }
  return `${job.id} ${job.queueName} ${n}`;
}

export { stage };
