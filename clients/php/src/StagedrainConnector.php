<?php

namespace Stagedrain\Laravel;

use Illuminate\Database\ConnectionResolverInterface;
use Illuminate\Queue\Connectors\ConnectorInterface;

/**
 * Makes a StagedQueue from a queue connection's config, as Laravel's
 * DatabaseConnector makes a DatabaseQueue:
 *
 *   'staged' => ['driver' => 'stagedrain', 'connection' => 'pgsql', 'queue' => 'default', 'worker' => 'redis']
 *
 * `connection` names a Laravel database connection (null: the default one);
 * jobs are staged through it, so inside its DB::transaction. `worker` names
 * the queue connection the workers run (default 'redis'): each row records
 * its Redis key prefix, which the relay checks against its --laravel-prefix.
 * `check_prefix` => false leaves that out, for a relay that predates the
 * check (it dead-letters rows that carry it).
 */
class StagedrainConnector implements ConnectorInterface
{
    /** @var \Illuminate\Database\ConnectionResolverInterface */
    protected $connections;

    /** @var \ArrayAccess|array the app's config */
    protected $config;

    /**
     * @param  \ArrayAccess|array  $config  the app's config, read for the worker's Redis prefix
     */
    public function __construct(ConnectionResolverInterface $connections, $config)
    {
        $this->connections = $connections;
        $this->config = $config;
    }

    /**
     * @param  array  $config
     * @return \Illuminate\Contracts\Queue\Queue
     */
    public function connect(array $config)
    {
        $prefix = ($config['check_prefix'] ?? true)
            ? RedisPrefix::of($this->config, self::worker($config))
            : null;

        // No `after_commit` here: a staged row is already invisible until
        // COMMIT, which is what after_commit asks for (see StagedQueue).
        return new StagedQueue(
            $this->connections->connection($config['connection'] ?? null),
            $config['queue'] ?? 'default',
            $prefix
        );
    }

    /** The queue connection a stagedrain connection's workers run. */
    public static function worker(array $config): string
    {
        return (string) (($config['worker'] ?? null) ?: 'redis');
    }
}
