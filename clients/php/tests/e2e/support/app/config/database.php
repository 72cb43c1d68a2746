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
        // As Laravel 8's skeleton has it: from APP_NAME ("Stagedrain E2E":
        // stagedrain_e2e_database_), which `php artisan stagedrain:prefix`
        // prints for the relay's --laravel-prefix.
        'options' => [
            'cluster' => 'redis',
            'prefix' => env('REDIS_PREFIX', Illuminate\Support\Str::slug(env('APP_NAME', 'laravel'), '_').'_database_'),
        ],
        'default' => [
            'url' => env('TEST_REDIS_URL'),
        ],
    ],
];
