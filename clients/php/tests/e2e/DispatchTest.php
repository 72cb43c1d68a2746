<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * Laravel's ways of dispatching, staged on the stagedrain connection and run
 * by the unmodified Redis worker: delays, Queue::later, onQueue, chains,
 * string jobs, closures, and tries/backoff on a failing job.
 */
final class DispatchTest extends E2ETestCase
{
    private function delayedKey(string $queue): string
    {
        return E2E::PREFIX."queues:{$queue}:delayed";
    }

    public function test_a_delayed_job_does_not_run_before_its_time(): void
    {
        $seconds = 3;
        $got = $this->scenario('delayed', ['seconds' => $seconds]);
        $due = (int) floor($got['before']) + $seconds;
        // Its neighbour ran at once; the delayed one waits in the zset, its
        // score the time Laravel's availableAt gave it.
        $this->waitRan([$this->tag.'-now']);
        $this->assertSame(0, $this->stagedCount());
        $this->assertSame([], $this->recordsOf($this->tag.'-delay'), 'not run before its time');
        $delayed = $this->e2e->redis()->zRange($this->delayedKey('default'), 0, -1, true);
        $this->assertCount(1, $delayed);
        $payload = json_decode((string) array_key_first($delayed), true);
        $this->assertSame('App\Jobs\Mark', $payload['displayName']);
        $this->assertSame(0, $payload['attempts']);
        $score = (int) current($delayed);
        $this->assertGreaterThanOrEqual($due, $score);
        $this->assertLessThanOrEqual($due + 1, $score);

        $ran = $this->waitRan([$this->tag.'-delay'], 15);
        $r = $ran[$this->tag.'-delay'];
        $this->assertGreaterThanOrEqual($score, $r['at'], 'it ran once due, not before');
        $this->assertLessThan($score + 5, $r['at'], 'and soon after');
        $this->assertSame($payload['uuid'], $r['uuid']);
        $this->assertSame(1, $r['attempts']);
    }

    public function test_queue_later_with_seconds_and_a_date(): void
    {
        $seconds = 2;
        $got = $this->scenario('later', ['seconds' => $seconds]);
        $due = (int) floor($got['before']) + $seconds;
        $ran = $this->waitRan([$this->tag.'-later', $this->tag.'-later-string'], 15);
        foreach ($ran as $r) {
            $this->assertGreaterThanOrEqual($due, $r['at'], 'not before its time');
        }
        $this->assertSame('object', $ran[$this->tag.'-later']['value']);
        $this->assertSame($got['ids'][0], $ran[$this->tag.'-later']['job_id'], 'Queue::later returns the id');
        $this->assertSame('legacy', $ran[$this->tag.'-later-string']['kind']);
        $this->assertSame(['tag' => $this->tag.'-later-string'], $ran[$this->tag.'-later-string']['data']);
        $this->assertSame($got['ids'][1], $ran[$this->tag.'-later-string']['job_id']);
    }

    public function test_on_queue_stages_for_that_queue(): void
    {
        $got = $this->scenario('onQueue');
        $tags = [$this->tag.'-1', $this->tag.'-2', $this->tag.'-3'];
        $ran = $this->waitRan($tags);
        foreach ($ran as $r) {
            $this->assertSame('x', $r['queue'], 'popped from queues:x');
        }
        $this->assertSame(['x', 'x', null], array_column(array_values($ran), 'own_queue'), 'onQueue sets the job\'s queue; pushOn does not');
        $this->assertSame($got['pushed_id'], $ran[$this->tag.'-3']['job_id']);
    }

    /**
     * The first link is staged by the app; each next one by the worker,
     * whose default connection is the stagedrain one too: it waits in
     * staged_jobs until a relay pushes it.
     */
    public function test_a_chain_runs_in_order_each_link_staged(): void
    {
        $this->e2e->stopRelay();
        $this->scenario('chain');
        for ($link = 1; $link <= 3; $link++) {
            $rows = $this->e2e->owner()->query('SELECT job_class, queue FROM staged_jobs')->fetchAll();
            $this->assertSame([['job_class' => 'App\Jobs\Mark', 'queue' => 'default']], $rows, "link {$link} waits in staged_jobs");
            $this->e2e->relayOnce();
            $this->waitUntil("link {$link} to run", function () use ($link) {
                return count($this->recordsOf($this->tag)) === $link;
            });
            if ($link < 3) {
                $this->waitUntil('the worker to stage the next link', function () {
                    return $this->stagedCount() === 1;
                });
            }
        }
        usleep(1000000);
        $this->assertSame(0, $this->stagedCount());
        $records = $this->recordsOf($this->tag);
        $this->assertSame([1, 2, 3], array_column($records, 'value'));
        $this->assertCount(3, array_unique(array_column($records, 'uuid')));
    }

    public function test_a_chain_runs_in_order_with_the_relay_running(): void
    {
        $this->scenario('chain');
        $this->waitUntil('3 links', function () {
            return count($this->recordsOf($this->tag)) === 3;
        });
        usleep(1000000);
        $this->assertSame([1, 2, 3], array_column($this->recordsOf($this->tag), 'value'));
    }

    public function test_a_string_job_queue_push_class_at_method(): void
    {
        $got = $this->scenario('strings');
        $r = $this->waitRan([$this->tag])[$this->tag];
        $this->assertSame('legacy', $r['kind']);
        $this->assertSame(['tag' => $this->tag, 'list' => [1, 'two', ['three' => 3.5]]], $r['data']);
        $this->assertSame('App\Jobs\Legacy@handle', $r['payload_job']);
        $this->assertSame('App\Jobs\Legacy', $r['display_name']);
        $this->assertSame($got['pushed_id'], $r['job_id']);
    }

    public function test_a_closure_job(): void
    {
        $this->scenario('closure');
        $r = $this->waitRan([$this->tag])[$this->tag];
        $this->assertSame(['closure', "captured \u{e9}"], [$r['kind'], $r['word']]);
    }

    /**
     * $tries = 3 and $backoff = [1, 2]: three attempts, the second at least
     * 1 s and the third 2 s after the one before (Laravel's whole-second
     * availableAt), then failed() and a failed_jobs row; the same job pushed
     * by Laravel's own Redis driver does exactly the same.
     */
    public function test_tries_and_backoff_then_failed_jobs_as_with_laravels_redis_driver(): void
    {
        $this->scenario('flaky');
        $this->waitUntil('both jobs to fail', function () {
            return count(array_filter($this->records(), function ($r) {
                return $r['kind'] === 'flaky-failed';
            })) === 2;
        }, 30);
        usleep(1500000);

        $failed = $this->e2e->owner()->query('SELECT uuid, connection, queue, payload, exception FROM failed_jobs ORDER BY id')->fetchAll();
        $this->assertCount(2, $failed);
        $failedByUuid = array_column($failed, null, 'uuid');
        $shapes = [];
        foreach (['staged', 'redis'] as $how) {
            $tag = "{$this->tag}-{$how}";
            $runs = array_values(array_filter($this->recordsOf($tag), function ($r) {
                return $r['kind'] === 'flaky';
            }));
            $fails = array_values(array_filter($this->recordsOf($tag), function ($r) {
                return $r['kind'] === 'flaky-failed';
            }));
            $this->assertSame([1, 2, 3], array_column($runs, 'attempts'), "{$how}: three tries");
            $this->assertCount(1, array_unique(array_column($runs, 'uuid')));
            $this->assertGreaterThanOrEqual(floor($runs[0]['at']) + 1, floor($runs[1]['at']), "{$how}: backoff 1 s");
            $this->assertGreaterThanOrEqual(floor($runs[1]['at']) + 2, floor($runs[2]['at']), "{$how}: then 2 s");
            $this->assertCount(1, $fails);
            $this->assertSame("flaky {$tag} fails on attempt 3", $fails[0]['message']);
            $row = $failedByUuid[$runs[0]['uuid']] ?? null;
            $this->assertNotNull($row, "{$how}: its failed_jobs row, by the payload's uuid");
            $this->assertStringContainsString("flaky {$tag} fails on attempt 3", $row['exception']);
            $payload = json_decode($row['payload'], true);
            $shapes[$how] = [
                $row['connection'], $row['queue'], $payload['displayName'], $payload['job'], $payload['maxTries'],
                $payload['backoff'], $payload['attempts'], array_column($runs, 'attempts'), array_column($runs, 'queue'),
            ];
        }
        // failed_jobs keeps the body as popped, before the pop's attempts + 1.
        $this->assertSame(['redis', 'default', 'App\Jobs\Flaky', 'Illuminate\Queue\CallQueuedHandler@call', 3, '1,2', 2, [1, 2, 3], ['default', 'default', 'default']], $shapes['staged']);
        $this->assertSame($shapes['redis'], $shapes['staged'], 'as with Laravel\'s own Redis driver');
    }
}
