<?php

namespace Stagedrain\Laravel;

use Closure;
use Illuminate\Contracts\Queue\Queue as QueueContract;
use Illuminate\Database\Connection;
use Illuminate\Database\QueryException;
use Illuminate\Queue\CallQueuedClosure;
use Illuminate\Queue\Queue;
use Illuminate\Support\Str;
use LogicException;
use stdClass;

/**
 * A queue that writes each job as a row of staged_jobs through a Laravel
 * database connection, in the caller's transaction; the stagedrain relay
 * pushes it to Redis once committed, as Laravel's RedisQueue would have.
 *
 * Shaped like Illuminate\Queue\DatabaseQueue. The payload is the framework's
 * own (createPayload), with RedisQueue's id and attempts, so the worker reads
 * the bytes RedisQueue would have pushed.
 */
class StagedQueue extends Queue implements QueueContract
{
    /** The relay's table, made by the package's migration or `stagedrain migrate`. */
    public const TABLE = 'staged_jobs';

    /** Rows per INSERT in bulk(): 6 bound values each, well under Postgres' 65535. */
    protected const BULK_ROWS = 1000;

    /** @var \Illuminate\Database\Connection */
    protected $database;

    /** @var string */
    protected $default;

    /** @var string the rows' options (JSON) */
    protected $options;

    /**
     * @param  \Illuminate\Database\Connection  $database  the connection (and so the transactions) jobs are staged in
     * @param  string  $default  the queue a job without one goes to
     * @param  string|null  $laravelPrefix  the worker's Redis key prefix, recorded in each row for the
     *                                      relay to check against its --laravel-prefix (null: not recorded)
     */
    public function __construct(Connection $database, $default = 'default', ?string $laravelPrefix = null)
    {
        $this->database = $database;
        $this->default = $default;
        $options = ['serialized' => true];
        if ($laravelPrefix !== null) {
            $options['laravel_prefix'] = $laravelPrefix;
        }
        $this->options = json_encode($options, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
    }

    /**
     * The rows of $queue not yet relayed (not the Redis queue's length).
     *
     * @param  string|null  $queue
     * @return int
     */
    public function size($queue = null)
    {
        return $this->database->table(static::TABLE)
            ->where('queue', $this->getQueue($queue))
            ->count();
    }

    /**
     * @param  object|string  $job
     * @param  mixed  $data
     * @param  string|null  $queue
     * @return string  the payload's id, as RedisQueue returns it
     */
    public function push($job, $data = '', $queue = null)
    {
        return $this->enqueueUsing(
            $job,
            $this->createStagedPayload($job, $queue, $data),
            $queue,
            null,
            function ($payload, $queue) {
                return $this->pushRaw($payload, $queue);
            }
        );
    }

    /**
     * Stage a payload built elsewhere (for instance by RedisQueue): it must
     * be a JSON object with what the relay needs (see checkPayload).
     *
     * @param  string  $payload
     * @param  string|null  $queue
     * @param  array  $options  ignored, as RedisQueue and DatabaseQueue do
     * @return string  the payload's id
     */
    public function pushRaw($payload, $queue = null, array $options = [])
    {
        return $this->stage([$this->row($payload, $queue, null)])[0];
    }

    /**
     * @param  \DateTimeInterface|\DateInterval|int  $delay
     * @param  object|string  $job
     * @param  mixed  $data
     * @param  string|null  $queue
     * @return string  the payload's id
     */
    public function later($delay, $job, $data = '', $queue = null)
    {
        return $this->enqueueUsing(
            $job,
            $this->createStagedPayload($job, $queue, $data, $delay),
            $queue,
            $delay,
            function ($payload, $queue, $delay) {
                return $this->stage([$this->row($payload, $queue, $this->availableAt($delay))])[0];
            }
        );
    }

    /**
     * All the jobs or none: every payload is built and checked before the
     * first INSERT. Like DatabaseQueue::bulk, no JobQueued events.
     *
     * @param  array  $jobs
     * @param  mixed  $data
     * @param  string|null  $queue
     * @return string[]  the payloads' ids, in order
     */
    public function bulk($jobs, $data = '', $queue = null)
    {
        $rows = [];
        foreach ((array) $jobs as $job) {
            $rows[] = $this->row($this->createStagedPayload($job, $queue, $data), $queue, null);
        }

        return $this->stage($rows);
    }

    /**
     * The stagedrain connection only stages: the relay pushes to Redis, and
     * the worker runs there (`php artisan queue:work redis`).
     *
     * @param  string|null  $queue
     * @return never
     */
    public function pop($queue = null)
    {
        throw new LogicException(
            'the stagedrain queue connection only stages jobs; run the worker on the Redis connection '
            .'the relay pushes to (php artisan queue:work redis)'
        );
    }

    /**
     * The bare queue name, as the row holds it (the relay adds "queues:").
     *
     * @param  string|null  $queue
     * @return string
     */
    public function getQueue($queue)
    {
        return $queue ?: $this->default;
    }

    /** @return \Illuminate\Database\Connection */
    public function getDatabase()
    {
        return $this->database;
    }

    /**
     * RedisQueue's payload: the relay pushes it to Redis as it is, and the
     * Redis worker expects this id and attempts count.
     */
    protected function createPayloadArray($job, $queue, $data = '')
    {
        return array_merge(parent::createPayloadArray($job, $queue, $data), [
            'id' => Str::random(32),
            'attempts' => 0,
        ]);
    }

    /**
     * Never defer the INSERT to after COMMIT, whatever afterCommit or
     * after_commit say: the row is already invisible until COMMIT (what they
     * ask for), and an INSERT run after COMMIT loses the job if the process
     * dies in between. Answering here rather than overriding enqueueUsing
     * keeps the framework's own enqueueUsing, which raises the JobQueueing /
     * JobQueued events with the arguments each Laravel version has.
     */
    protected function shouldDispatchAfterCommit($job)
    {
        return false;
    }

    /**
     * The framework's payload for $job, after checking that serialize()
     * writes all of it: a resource would reach the worker as 0.
     *
     * @param  \DateTimeInterface|\DateInterval|int|null  $delay
     */
    protected function createStagedPayload($job, $queue, $data, $delay = null)
    {
        if (is_object($job)) {
            // What createPayload serializes: a Closure inside its
            // CallQueuedClosure (its use variables), anything else cloned.
            $serialized = $job instanceof Closure ? CallQueuedClosure::create($job) : clone $job;
            $path = ResourceFinder::find($serialized, '$job');
            if ($path !== null) {
                throw new NotStageable(sprintf(
                    'cannot stage %s: %s is a resource, which serialize() would write as 0',
                    $job instanceof Closure ? 'a Closure job' : get_class($job),
                    $path
                ));
            }
        }

        // Laravel 12.11+ takes the delay and writes it into the payload;
        // before that, PHP ignores the extra argument.
        return $this->createPayload($job, $this->getQueue($queue), $data, $delay);
    }

    /**
     * One row's values, the payload checked first (see checkPayload).
     *
     * @param  int|null  $availableAt  Unix time, or null to run now
     * @return array  [queue, job_class, args, run_at, uuid, id]
     */
    protected function row($payload, $queue, $availableAt)
    {
        $decoded = $this->checkPayload($payload);

        // args is [payload], the payload text as one JSON string: the form
        // the relay reads for a payload the framework built ("serialized":
        // true). It unwraps the string and pushes the payload's bytes as
        // json_encode wrote them (a NUL in a private or protected property's
        // name is the six characters \u0000 there), as RedisQueue would.
        $args = json_encode([$payload], JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES);
        if ($args === false) {
            throw new NotStageable('cannot stage the payload: '.json_last_error_msg());
        }

        return [$this->getQueue($queue), $decoded->displayName, $args, $availableAt, $decoded->uuid, $decoded->id];
    }

    /**
     * What the relay needs to push a payload (it dead-letters anything else):
     * a JSON object with a lower-case uuid, a displayName (the row's
     * job_class), a non-empty job, a string id and attempts >= 0. Checked
     * here so a bad one raises at the call, before a failed INSERT could
     * abort the caller's transaction.
     */
    protected function checkPayload($payload): stdClass
    {
        $decoded = is_string($payload) ? json_decode($payload) : null;
        $ok = $decoded instanceof stdClass
            && is_string($decoded->uuid ?? null)
            && preg_match('/\A[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\z/', $decoded->uuid)
            && is_string($decoded->displayName ?? null)
            && is_string($decoded->job ?? null) && $decoded->job !== ''
            && is_string($decoded->id ?? null)
            && is_int($decoded->attempts ?? null) && $decoded->attempts >= 0;
        if (! $ok) {
            throw new NotStageable(
                'cannot stage a payload that is not a JSON object with a lower-case uuid, a string displayName, '
                .'a non-empty string job, a string id and a non-negative integer attempts'
            );
        }

        return $decoded;
    }

    /**
     * INSERT the rows through the Laravel connection (so in its open
     * transaction or savepoint, if any) and return their payload ids.
     */
    protected function stage(array $rows)
    {
        foreach (array_chunk($rows, static::BULK_ROWS) as $chunk) {
            $values = [];
            $bindings = [];
            foreach ($chunk as [$queue, $class, $args, $availableAt, $uuid]) {
                $values[] = '(?, ?, CAST(? AS json), CAST(? AS json), to_timestamp(CAST(? AS bigint)), CAST(? AS uuid))';
                array_push($bindings, $queue, $class, $args, $this->options, $availableAt, $uuid);
            }
            try {
                $this->database->insert(
                    'INSERT INTO '.static::TABLE.' (queue, job_class, args, options, run_at, uuid) VALUES '.implode(', ', $values),
                    $bindings
                );
            } catch (QueryException $e) {
                // 42P01 undefined_table, 42703 undefined_column
                if (in_array((string) $e->getCode(), ['42P01', '42703'], true)) {
                    throw new NotMigrated(
                        static::TABLE.' or one of its columns is missing on database connection "'
                        .$this->database->getName().'": run the stagedrain migration on that database (php artisan '
                        .'vendor:publish --tag=stagedrain-migrations, then php artisan migrate; or stagedrain migrate)',
                        0,
                        $e
                    );
                }
                throw $e;
            }
        }

        return array_column($rows, 5);
    }
}
