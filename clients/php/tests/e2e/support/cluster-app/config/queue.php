<?php

// ClusterTest's app: every queue name hash-tagged ({default}), so each
// queue's keys (queues:{default}, :delayed, :reserved, :notify) share a slot.

return [
    'default' => env('QUEUE_CONNECTION', 'staged'),
    'connections' => [
        'staged' => [
            'driver' => 'stagedrain',
            'connection' => 'pgsql',
            'queue' => '{default}',
            'worker' => 'redis',
        ],
        'redis' => [
            'driver' => 'redis',
            'connection' => 'default',
            'queue' => '{default}',
            'retry_after' => 90,
            'block_for' => 1, // an idle worker waits on queues:{default}:notify, in the queue's slot
            'after_commit' => false,
        ],
    ],
    'failed' => [
        'driver' => 'database-uuids',
        'database' => 'pgsql',
        'table' => 'failed_jobs',
    ],
];
