<?php

namespace Stagedrain\Laravel\Tests;

use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Redis\RedisManager;
use Illuminate\Support\Str;
use InvalidArgumentException;
use Redis;
use Stagedrain\Laravel\RedisPrefix;
use Stagedrain\Laravel\StagedQueue;

require_once __DIR__.'/TestCase.php';

/**
 * The prefix each row records (the relay's --laravel-prefix): exact values
 * for the configs an app has, and, for phpredis, the prefix Laravel's own
 * RedisManager sets on a real connection to the harness's Redis.
 */
class RedisPrefixTest extends TestCase
{
    /** config/database.php's redis section, as Laravel 8's skeleton has it for APP_NAME=$app. */
    private static function skeleton(string $app = 'Laravel', array $merge = []): array
    {
        return array_replace_recursive([
            'client' => 'phpredis',
            'options' => ['cluster' => 'redis', 'prefix' => Str::slug($app, '_').'_database_'],
            'default' => ['url' => self::env('TEST_REDIS_URL'), 'database' => '0'],
            'cache' => ['url' => self::env('TEST_REDIS_URL'), 'database' => '1'],
        ], $merge);
    }

    private static function config(array $redis, array $queue = ['driver' => 'redis', 'connection' => 'default'], string $name = 'redis'): Repository
    {
        return new Repository(['database' => ['redis' => $redis], 'queue' => ['connections' => [$name => $queue]]]);
    }

    /** What Laravel's phpredis connection really prefixes keys with. */
    private static function laravels(array $redis, string $connection): string
    {
        $client = (new RedisManager(new Container, $redis['client'], $redis))->connection($connection)->client();
        try {
            return (string) $client->getOption(Redis::OPT_PREFIX);
        } finally {
            $client->close();
        }
    }

    public function testTheSkeletonsDefaultIsLaravelDatabase(): void
    {
        $redis = self::skeleton();
        $this->assertSame('laravel_database_', RedisPrefix::of(self::config($redis), 'redis'));
        $this->assertSame('laravel_database_', self::laravels($redis, 'default'));
    }

    public function testTheAppNameMakesThePrefix(): void
    {
        $redis = self::skeleton('My Shop');
        $this->assertSame('my_shop_database_', RedisPrefix::of(self::config($redis), 'redis'));
        $this->assertSame('my_shop_database_', self::laravels($redis, 'default'));
    }

    /** @return array<string, array{0: array, 1: string}> */
    public function phpredisConfigs(): array
    {
        return [
            'the connection\'s options win' => [['default' => ['options' => ['prefix' => 'own:']]], 'own:'],
            'the global options win over the connection\'s key' => [['default' => ['prefix' => 'key:']], 'shop_database_'],
            'the connection\'s key when the options have no prefix' => [['default' => ['prefix' => 'key:']], 'key:', true],
            'a URL\'s ?prefix= is the connection\'s key' => [['default' => ['url' => self::env('TEST_REDIS_URL').'?prefix=url:']], 'url:', true],
            'a null global prefix hides the connection\'s key' => [['options' => ['prefix' => null], 'default' => ['prefix' => 'key:']], ''],
            'an empty prefix is none' => [['options' => ['prefix' => '']], ''],
            '"0" is none for phpredis' => [['options' => ['prefix' => '0']], ''],
        ];
    }

    /** @dataProvider phpredisConfigs */
    public function testPhpredisAsLaravelSetsIt(array $merge, string $expected, bool $noGlobalPrefix = false): void
    {
        $redis = self::skeleton('Shop', $merge);
        if ($noGlobalPrefix) {
            unset($redis['options']['prefix']);
        }
        $this->assertSame($expected, RedisPrefix::of(self::config($redis), 'redis'));
        $this->assertSame($expected, self::laravels($redis, 'default'));
    }

    public function testTheWorkersQueueConnectionNamesTheRedisConnection(): void
    {
        $redis = self::skeleton('Shop', ['queue' => ['url' => self::env('TEST_REDIS_URL'), 'options' => ['prefix' => 'jobs:']]]);
        $config = self::config($redis, ['driver' => 'redis', 'connection' => 'queue'], 'jobs');
        $this->assertSame('jobs:', RedisPrefix::of($config, 'jobs'));
        $this->assertSame('jobs:', self::laravels($redis, 'queue'));
        // No 'connection': RedisManager's 'default'.
        $this->assertSame('shop_database_', RedisPrefix::of(self::config($redis, ['driver' => 'redis']), 'redis'));
    }

    public function testPredisTakesTheConnectionsOwnPrefixFirst(): void
    {
        $redis = self::skeleton('Shop', ['client' => 'predis', 'default' => ['prefix' => 'key:', 'options' => ['prefix' => 'own:']]]);
        $this->assertSame('key:', RedisPrefix::of(self::config($redis), 'redis'));
        $redis = self::skeleton('Shop', ['client' => 'predis', 'options' => ['prefix' => '0']]);
        $this->assertSame('0', RedisPrefix::of(self::config($redis), 'redis'));
    }

    public function testAClusterTakesItsOptions(): void
    {
        $clusters = ['options' => ['prefix' => 'clusters:'], 'jobs' => [['host' => 'a', 'port' => 7000], 'options' => ['prefix' => 'mine:']]];
        $redis = self::skeleton('Shop', ['clusters' => $clusters]);
        $config = self::config($redis, ['driver' => 'redis', 'connection' => 'jobs']);
        $this->assertSame('mine:', RedisPrefix::of($config, 'redis'));
        unset($clusters['jobs']['options']);
        $this->assertSame('clusters:', RedisPrefix::of(self::config(self::skeleton('Shop', ['clusters' => $clusters]), ['driver' => 'redis', 'connection' => 'jobs']), 'redis'));
    }

    /** @return array<string, array{0: \Illuminate\Config\Repository, 1: string}> */
    public function badConfigs(): array
    {
        return [
            'no such queue connection' => [self::config(self::skeleton(), ['driver' => 'redis'], 'other'), 'the worker queue connection "redis" is not in config/queue.php'],
            'not redis' => [self::config(self::skeleton(), ['driver' => 'database']), 'has driver "database", not "redis"'],
            'no such redis connection' => [self::config(self::skeleton(), ['driver' => 'redis', 'connection' => 'nope']), 'uses Redis connection "nope", which config/database.php\'s redis section does not configure'],
        ];
    }

    /** @dataProvider badConfigs */
    public function testABadWorkerConnectionIsNamed(Repository $config, string $message): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage($message);
        RedisPrefix::of($config, 'redis');
    }

    /** The row records the prefix of the connection named by 'worker'. */
    public function testEachRowRecordsTheWorkersPrefix(): void
    {
        $this->queue->addConnection(['driver' => 'redis', 'connection' => 'jobs'], 'jobs');
        $this->container['config']['database.redis'] = self::skeleton('Shop', ['jobs' => ['options' => ['prefix' => 'jobs:']]]);
        $this->queue->addConnection(['driver' => 'stagedrain', 'worker' => 'jobs'], 'to-jobs');
        $this->queue->addConnection(['driver' => 'stagedrain'], 'to-redis');
        $this->queue->addConnection(['driver' => 'stagedrain', 'check_prefix' => false], 'unchecked');

        $this->staged('to-jobs')->push(new SendInvoice(['id' => 1], 'a'));
        $this->staged('to-redis')->push(new SendInvoice(['id' => 2], 'b'));
        $this->staged('to-redis')->pushRaw(self::unwrap($this->rows()[1]));
        $this->staged('to-redis')->bulk([new SendInvoice(['id' => 3], 'c')]);
        $this->staged('to-redis')->later(60, new SendInvoice(['id' => 4], 'd'));
        $this->staged('unchecked')->push(new SendInvoice(['id' => 5], 'e'));

        $this->assertSame([
            '{"serialized":true,"laravel_prefix":"jobs:"}',
            '{"serialized":true,"laravel_prefix":"shop_database_"}',
            '{"serialized":true,"laravel_prefix":"shop_database_"}',
            '{"serialized":true,"laravel_prefix":"shop_database_"}',
            '{"serialized":true,"laravel_prefix":"shop_database_"}',
            '{"serialized":true}',
        ], array_column($this->rows(), 'options'));
    }

    public function testABadWorkerFailsTheDispatchAndStagesNothing(): void
    {
        $this->queue->addConnection(['driver' => 'stagedrain', 'worker' => 'sync'], 'bad');
        $this->queue->addConnection(['driver' => 'sync'], 'sync');
        try {
            $this->staged('bad');
            $this->fail('no exception');
        } catch (InvalidArgumentException $e) {
            $this->assertStringContainsString('the worker queue connection "sync" has driver "sync", not "redis"', $e->getMessage());
        }
        $this->assertSame([], $this->rows());
    }
}
