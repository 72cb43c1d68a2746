<?php

// ClusterTest's app: the e2e app with its Redis on a Redis Cluster
// (phpredis' RedisCluster), as the docs tell a Laravel app to configure it.

use Illuminate\Support\Str;

return [
    'default' => env('DB_CONNECTION', 'pgsql'),
    'connections' => [
        'pgsql' => [
            'driver' => 'pgsql',
            'url' => env('DATABASE_URL'),
            'charset' => 'utf8',
            'prefix' => '',
            'schema' => 'public',
            'sslmode' => 'prefer',
        ],
    ],
    'migrations' => 'migrations',
    'redis' => [
        'client' => 'phpredis',
        'options' => [
            // Redis Cluster itself (phpredis' RedisCluster), not client-side sharding.
            'cluster' => 'redis',
            'prefix' => env('REDIS_PREFIX', Str::slug(env('APP_NAME', 'laravel'), '_').'_database_'),
        ],
        // No 'default' connection beside the cluster: RedisManager would
        // take it before clusters.default.
        'clusters' => [
            // Seed nodes (host:port, comma-separated); phpredis learns the rest.
            'default' => array_map(static function (string $seed) {
                [$host, $port] = explode(':', $seed);

                return ['host' => $host, 'port' => (int) $port, 'database' => 0];
            }, explode(',', (string) env('REDIS_CLUSTER_SEEDS', '127.0.0.1:7000'))),
        ],
    ],
];
