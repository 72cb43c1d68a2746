<?php

return [
    'default' => env('QUEUE_CONNECTION', 'staged'),
    'connections' => [
        // Dispatching stages a row in staged_jobs, in the caller's transaction.
        'staged' => [
            'driver' => 'stagedrain',
            'connection' => 'pgsql',
            'queue' => 'default',
            'worker' => 'redis',
            // PrefixTest turns it off to see the rows without the key.
            'check_prefix' => env('STAGEDRAIN_E2E_CHECK_PREFIX', true),
        ],
        // What the relay pushes to and `php artisan queue:work redis` works.
        'redis' => [
            'driver' => 'redis',
            'connection' => 'default',
            'queue' => 'default',
            'retry_after' => 90,
            'block_for' => null,
            'after_commit' => false,
        ],
    ],
    'failed' => [
        'driver' => 'database-uuids',
        'database' => 'pgsql',
        'table' => 'failed_jobs',
    ],
];
