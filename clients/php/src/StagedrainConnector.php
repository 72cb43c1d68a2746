<?php

namespace Stagedrain\Laravel;

use Illuminate\Database\ConnectionResolverInterface;
use Illuminate\Queue\Connectors\ConnectorInterface;

/**
 * Makes a StagedQueue from a queue connection's config, as Laravel's
 * DatabaseConnector makes a DatabaseQueue:
 *
 *   'staged' => ['driver' => 'stagedrain', 'connection' => 'pgsql', 'queue' => 'default']
 *
 * `connection` names a Laravel database connection (null: the default one);
 * jobs are staged through it, so inside its DB::transaction.
 */
class StagedrainConnector implements ConnectorInterface
{
    /** @var \Illuminate\Database\ConnectionResolverInterface */
    protected $connections;

    public function __construct(ConnectionResolverInterface $connections)
    {
        $this->connections = $connections;
    }

    /**
     * @param  array  $config
     * @return \Illuminate\Contracts\Queue\Queue
     */
    public function connect(array $config)
    {
        // No `after_commit` here: a staged row is already invisible until
        // COMMIT, which is what after_commit asks for (see StagedQueue).
        return new StagedQueue(
            $this->connections->connection($config['connection'] ?? null),
            $config['queue'] ?? 'default'
        );
    }
}
