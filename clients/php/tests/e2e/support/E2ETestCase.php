<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

use PHPUnit\Framework\TestCase;

require_once __DIR__.'/E2E.php';

/**
 * A case against the shared world: the app, one worker and one relay. Each
 * case starts from empty tables, an empty Redis and a running relay, and may
 * not leave rows in staged_jobs_dead unless it says it expects some.
 */
abstract class E2ETestCase extends TestCase
{
    /** @var E2E */
    protected $e2e;
    /** @var bool */
    protected $expectDead = false;
    /** @var string */
    protected $tag;

    public static function setUpBeforeClass(): void
    {
        E2E::world();
    }

    protected function setUp(): void
    {
        $this->e2e = E2E::world();
        $this->e2e->reset();
        $this->expectDead = false;
        $this->tag = substr(strrchr(static::class, '\\'), 1).'.'.$this->getName(false).'.'.bin2hex(random_bytes(3));
    }

    protected function tearDown(): void
    {
        if ($this->expectDead || $this->hasFailed()) {
            return;
        }
        $dead = $this->e2e->owner()->query('SELECT job_class, reason FROM staged_jobs_dead')->fetchAll();
        $this->assertSame([], $dead, 'the relay dead-lettered rows');
    }

    /** @param  array  $env  over the app's environment */
    protected function scenario(string $name, array $input = [], array $env = []): array
    {
        return $this->e2e->scenario($name, $input + ['tag' => $this->tag], $env);
    }

    /** Every record the worker wrote so far, oldest first. */
    protected function records(): array
    {
        return array_map(static function (string $json) {
            return json_decode($json, true, 512, JSON_THROW_ON_ERROR);
        }, $this->e2e->redis()->lRange(E2E::RAN, 0, -1));
    }

    /** @return array<int, array> the records whose tag is $tag, oldest first */
    protected function recordsOf(string $tag): array
    {
        return array_values(array_filter($this->records(), function (array $r) use ($tag) {
            return $this->tagOf($r) === $tag;
        }));
    }

    protected function waitUntil(string $what, callable $done, float $timeout = 30.0)
    {
        $deadline = microtime(true) + $timeout;
        while (true) {
            $value = $done();
            if ($value) {
                return $value;
            }
            if (microtime(true) > $deadline) {
                $this->fail(sprintf(
                    "timed out after %.0f s waiting for %s\nworker log:\n%s\nrelay log:\n%s\napp log:\n%s",
                    $timeout, $what, E2E::tail($this->e2e->log('worker')), E2E::tail($this->e2e->log('relay')),
                    E2E::tail($this->e2e->app.'/storage/logs/laravel.log')
                ));
            }
            usleep(50000);
        }
    }

    /**
     * Waits until a job with each tag ran, then a second more so a duplicate
     * would show; each must have run exactly once. Returns the records by tag.
     */
    protected function waitRan(array $tags, float $timeout = 30.0): array
    {
        $this->waitUntil(count($tags).' jobs to run ('.implode(', ', $tags).')', function () use ($tags) {
            $seen = array_count_values(array_filter(array_map([$this, 'tagOf'], $this->records()), 'is_string'));

            return count(array_diff($tags, array_keys($seen))) === 0;
        }, $timeout);
        usleep(1000000);
        $byTag = [];
        foreach ($this->records() as $r) {
            $byTag[$this->tagOf($r)][] = $r;
        }
        $runs = [];
        foreach ($tags as $tag) {
            $runs[$tag] = count($byTag[$tag] ?? []);
        }
        $this->assertSame(array_fill_keys($tags, 1), $runs, 'every job runs exactly once');

        return array_map(static function (array $rs) {
            return $rs[0];
        }, array_intersect_key($byTag, array_flip($tags)));
    }

    protected function neverRan(array $tags): void
    {
        $ran = array_intersect($tags, array_map([$this, 'tagOf'], $this->records()));
        $this->assertSame([], array_values($ran), 'rolled-back jobs never run');
    }

    /** @return string|null */
    protected function tagOf(array $r)
    {
        $tag = $r['tag'] ?? (is_array($r['data'] ?? null) ? ($r['data']['tag'] ?? $r['data'][0]['tag'] ?? null) : null);

        return is_string($tag) ? $tag : null;
    }

    protected function stagedCount(): int
    {
        return (int) $this->e2e->owner()->query('SELECT count(*) FROM staged_jobs')->fetchColumn();
    }

    /** Waits until the relay took every committed row out of staged_jobs. */
    protected function waitDrained(float $timeout = 30.0): void
    {
        $this->waitUntil('the relay to drain staged_jobs', function () {
            return $this->stagedCount() === 0;
        }, $timeout);
    }
}
