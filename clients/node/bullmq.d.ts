// Types of require('stagedrain/bullmq'), written by hand for the CommonJS code
// beside them. The job options follow BullMQ 6.7's JobsOptions, less what
// cannot be staged (repeat, parent, deduplication: each throws at add()).

/** node-postgres's Client, PoolClient or Pool, TypeORM's QueryRunner, or your own adapter: $1-style parameters. */
export interface Queryable {
  query(text: string, values?: any[]): PromiseLike<unknown>;
}

/** A knex transaction (or knex itself): raw() with ?-style bindings. */
export interface KnexLike {
  (...args: any[]): any;
  raw(sql: string, bindings: readonly any[]): PromiseLike<unknown>;
}

export type StagedDb = Queryable | KnexLike;

/** BullMQ's BackoffOptions. */
export interface BackoffOptions {
  type: 'fixed' | 'exponential' | (string & {});
  delay?: number;
  /** Between 0 and 1. */
  jitter?: number;
}

/** BullMQ's KeepJobs. */
export type KeepJobs =
  | { count: number }
  | { age: number; count?: number; limit?: number };

/** BullMQ's DefaultJobOptions. */
export interface DefaultJobOptions {
  /** When the job was made (ms since the epoch); default: the time of the add() call. Not 0. */
  timestamp?: number;
  /** 0 (none) to 2097151; lower runs first. An integer. */
  priority?: number;
  /** Milliseconds to wait, counted from timestamp (the add() call), not from the COMMIT. */
  delay?: number;
  attempts?: number;
  backoff?: number | BackoffOptions;
  lifo?: boolean;
  removeOnComplete?: boolean | number | KeepJobs;
  removeOnFail?: boolean | number | KeepJobs;
  keepLogs?: number;
  stackTraceLimit?: number;
  /** Largest JSON text of the data, in bytes. */
  sizeLimit?: number;
}

/** The options add() takes: BullMQ's JobsOptions that a staged job can carry. */
export interface StagedJobsOptions extends DefaultJobOptions {
  /** An id of your own: not an integer, not '0', no ':' unless in three parts. */
  jobId?: string;
  prevMillis?: number;
  failParentOnFailure?: boolean;
  continueParentOnFailure?: boolean;
  ignoreDependencyOnFailure?: boolean;
  removeDependencyOnFailure?: boolean;
  telemetry?: {
    metadata?: string;
    omitContext?: boolean;
  };
}

export interface StagedQueueOptions {
  /** The handle whose transaction the rows join. */
  db: StagedDb;
  /** Merged under each add()'s options, as BullMQ's Queue does. */
  defaultJobOptions?: DefaultJobOptions;
  /** BullMQ's prefix (default 'bull'): the relay's --bullmq-prefix must be the same. Not stored. */
  prefix?: string;
}

/** A staged job as the worker will see it; not a BullMQ Job. */
export declare class StagedJob<DataType = any, NameType extends string = string> {
  readonly queueName: string;
  /** The custom jobId, else the UUID drawn at add(). */
  readonly id: string;
  readonly name: NameType;
  /** The data as the worker's JSON.parse will read it. */
  readonly data: DataType;
  /** The options as the job hash stores them (keepLogs as kl, and so on). */
  readonly opts: Record<string, unknown> & { attempts?: number };
  /** Milliseconds since the epoch: the add() call's, or opts.timestamp. */
  readonly timestamp: number;
  readonly delay: number;
  readonly priority: number;
}

export interface StagedBulkJob<DataType = any, NameType extends string = string> {
  name: NameType;
  data: DataType;
  opts?: StagedJobsOptions;
}

export declare class StagedQueue<DataType = any, NameType extends string = string> {
  constructor(name: string, opts: StagedQueueOptions);
  readonly name: string;
  readonly prefix: string;
  readonly defaultJobOptions: DefaultJobOptions;
  /** Stages one job in db's transaction; rejects, staging nothing, if it cannot be staged. */
  add(name: NameType, data: DataType, opts?: StagedJobsOptions): Promise<StagedJob<DataType, NameType>>;
  /** Stages the jobs in one INSERT; all are checked before any is written. */
  addBulk(jobs: StagedBulkJob<DataType, NameType>[]): Promise<StagedJob<DataType, NameType>[]>;
}

/** Why a job was not staged. */
export declare class StagedJobError extends Error {}
