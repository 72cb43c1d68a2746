<?php

namespace Stagedrain\Laravel;

use Illuminate\Support\Arr;
use Illuminate\Support\ConfigurationUrlParser;
use InvalidArgumentException;

/**
 * The key prefix a worker's RedisQueue keys its lists under ("queues:<q>"
 * follows it): what the relay's --laravel-prefix must be. A relay with another
 * prefix pushes to lists no worker reads.
 *
 * Read from Laravel 8.83's RedisManager::resolve()/resolveCluster() and its
 * connectors: for phpredis (PhpRedisConnector), the Redis connection's
 * 'options' win over database.redis.options, which win over a 'prefix' key of
 * the connection itself (or its URL's ?prefix=); an empty() prefix is none.
 * For predis (PredisConnector) the connection's own 'prefix' wins over both.
 * A cluster takes its prefix from the options alone (database.redis.options,
 * then clusters.options, then the cluster's own 'options'), but for predis,
 * whose cluster-level 'prefix' wins.
 */
final class RedisPrefix
{
    /**
     * @param  \ArrayAccess|array  $config  the app's config ('queue.connections.<name>', 'database.redis')
     * @param  string  $worker  the queue connection `php artisan queue:work` runs
     */
    public static function of($config, string $worker): string
    {
        $queue = $config['queue.connections.'.$worker] ?? null;
        if (! is_array($queue)) {
            throw new InvalidArgumentException(sprintf(
                'stagedrain: the worker queue connection "%s" is not in config/queue.php: set the stagedrain '
                .'connection\'s \'worker\' to the queue connection `php artisan queue:work` runs', $worker
            ));
        }
        if (($queue['driver'] ?? null) !== 'redis') {
            throw new InvalidArgumentException(sprintf(
                'stagedrain: the worker queue connection "%s" has driver "%s", not "redis": the relay pushes '
                .'to Redis, so the worker must run a redis queue connection', $worker, $queue['driver'] ?? ''
            ));
        }
        // RedisQueue asks RedisManager for $queue['connection']; none is 'default'.
        $name = ($queue['connection'] ?? null) ?: 'default';
        $redis = $config['database.redis'] ?? [];
        $client = $redis['client'] ?? 'phpredis';
        $options = $redis['options'] ?? [];

        if (isset($redis[$name])) {
            $connection = self::parse($redis[$name]);
            $own = $connection['options'] ?? [];
            $predis = $client === 'predis' && isset($connection['prefix']);
            $prefix = $predis ? $connection['prefix'] : (array_merge($connection, $options, $own)['prefix'] ?? null);
        } elseif (isset($redis['clusters'][$name])) {
            $cluster = $redis['clusters'][$name];
            $merged = array_merge($options, $redis['clusters']['options'] ?? [], $cluster['options'] ?? []);
            $predis = $client === 'predis' && isset($cluster['prefix']);
            $prefix = $predis ? $cluster['prefix'] : ($merged['prefix'] ?? null);
        } else {
            throw new InvalidArgumentException(sprintf(
                'stagedrain: the worker queue connection "%s" uses Redis connection "%s", which '
                .'config/database.php\'s redis section does not configure', $worker, $name
            ));
        }

        // phpredis sets no prefix for an empty() one ("0" too); predis takes
        // any string, and any prefix from its options too.
        if ($client === 'predis') {
            return (string) $prefix;
        }

        return empty($prefix) ? '' : (string) $prefix;
    }

    /** As RedisManager::parseConnectionConfiguration: a URL's parts and query merged in. */
    private static function parse($connection): array
    {
        return Arr::except((new ConfigurationUrlParser)->parseConfiguration($connection), ['driver']);
    }
}
