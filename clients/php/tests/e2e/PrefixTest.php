<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * Each row records the Redis key prefix the app's workers read
 * (options.laravel_prefix); the relay dead-letters a row whose prefix is not
 * its --laravel-prefix, naming both, instead of pushing it where no worker
 * reads.
 */
final class PrefixTest extends E2ETestCase
{
    private const CHECK = ['STAGEDRAIN_E2E_CHECK_PREFIX' => 'true'];

    public function test_the_row_records_the_prefix_laravel_derives_from_app_name(): void
    {
        $this->e2e->stopRelay();
        $this->scenario('many', ['n' => 1], self::CHECK);
        $this->scenario('many', ['n' => 1], self::CHECK + ['APP_NAME' => 'My Shop']);
        $this->scenario('many', ['n' => 1], self::CHECK + ['REDIS_PREFIX' => 'jobs:']);
        $this->scenario('many', ['n' => 1], ['STAGEDRAIN_E2E_CHECK_PREFIX' => 'false']);
        $options = $this->e2e->owner()->query('SELECT options::text FROM staged_jobs ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN);
        $this->assertSame([
            '{"serialized":true,"laravel_prefix":"'.E2E::PREFIX.'"}',
            '{"serialized":true,"laravel_prefix":"my_shop_database_"}',
            '{"serialized":true,"laravel_prefix":"jobs:"}',
            '{"serialized":true}',
        ], $options);
        $this->e2e->owner()->exec('DELETE FROM staged_jobs');
    }

    public function test_a_row_with_the_relays_prefix_runs(): void
    {
        $this->scenario('many', ['n' => 1], self::CHECK);
        $this->waitRan([$this->tag]);
    }

    public function test_a_row_with_another_prefix_is_dead_lettered_naming_both(): void
    {
        $this->expectDead = true;
        $this->scenario('many', ['n' => 1, 'tag' => $this->tag.'-other'], self::CHECK + ['APP_NAME' => 'Other App']);
        $this->scenario('many', ['n' => 1, 'tag' => $this->tag.'-ours'], self::CHECK);
        $this->waitRan([$this->tag.'-ours']);
        $this->waitDrained();
        $reason = $this->e2e->owner()->query('SELECT reason FROM staged_jobs_dead')->fetchAll(\PDO::FETCH_COLUMN);
        $this->assertCount(1, $reason);
        $this->assertStringContainsString('other_app_database_', $reason[0]);
        $this->assertStringContainsString(E2E::PREFIX, $reason[0]);
        $this->neverRan([$this->tag.'-other']);
    }
}
