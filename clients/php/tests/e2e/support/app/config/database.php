<?php

return [
    'default' => 'pgsql',
    'connections' => [
        // The app's role (stagedrain_app's INSERT on staged_jobs, its own tables).
        'pgsql' => [
            'driver' => 'pgsql',
            'url' => env('STAGEDRAIN_APP_PG_URL'),
            'charset' => 'utf8',
            'prefix' => '',
            'schema' => 'public',
            'sslmode' => 'disable',
        ],
    ],
    'migrations' => 'migrations',
    'redis' => [
        'client' => 'phpredis',
        // Laravel's default prefix for an app named "laravel"; the relay runs
        // with --laravel-prefix laravel_database_.
        'options' => [
            'cluster' => 'redis',
            'prefix' => 'laravel_database_',
        ],
        'default' => [
            'url' => env('TEST_REDIS_URL'),
        ],
    ],
];
