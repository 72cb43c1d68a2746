<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * What a committed DB::transaction dispatched runs exactly once, with its
 * constructor arguments; what rolls back (a transaction, rollBack(), a
 * savepoint) never runs; order holds; a stopped relay only delays.
 */
final class TransactionsTest extends E2ETestCase
{
    public function test_a_committed_transactions_jobs_run_once_with_their_arguments(): void
    {
        $list = [
            'scalars' => [1, -2, 2.5, 1.0, 'ü "quoted" \\ / slash', true, false, null, PHP_INT_MAX],
            'nested' => ['a' => ['b' => ['c' => 'deep']]],
            'empty' => [],
            'text' => "line\u{2028}sep\ttab\nnewline \u{1F600}",
        ];
        // Staged while no relay runs, so the rows can be read first.
        $this->e2e->stopRelay();
        $got = $this->scenario('commit', ['list' => $list]);
        $rows = $this->e2e->owner()->query(
            'SELECT job_class, uuid::text AS uuid, options::text AS options, args->>0 AS payload, json_array_length(args) AS n FROM staged_jobs ORDER BY id'
        )->fetchAll();
        $this->assertCount(3, $rows);
        foreach ($rows as $i => $row) {
            $n = $i + 1;
            $this->assertSame(['App\Jobs\Typed', $this->e2e->rowOptions(), 1], [$row['job_class'], $row['options'], $row['n']]);
            // args holds the payload text json_encode wrote, where a NUL is the six characters \u0000.
            $this->assertStringContainsString('\\u0000*\\u0000secret', $row['payload'], 'a protected property\'s name');
            $this->assertStringContainsString('\\u0000App\\\\Jobs\\\\Typed\\u0000hidden', $row['payload'], 'a private one\'s');
            $payload = json_decode($row['payload'], true, 512, JSON_THROW_ON_ERROR);
            $this->assertSame($row['uuid'], $payload['uuid']);
            $this->assertSame('App\Jobs\Typed', $payload['displayName']);
            $this->assertStringContainsString("s:9:\"\0*\0secret\";s:8:\"secret-{$n}\"", $payload['data']['command'], 'serialize()\'s own bytes');
        }
        $this->e2e->relayOnce();
        $tags = [$this->tag.'-1', $this->tag.'-2', $this->tag.'-3'];
        $ran = $this->waitRan($tags);

        $ids = [];
        $uuids = [];
        foreach ($tags as $i => $tag) {
            $n = $i + 1;
            $r = $ran[$tag];
            $this->assertSame('typed', $r['kind']);
            $this->assertSame($n, $r['number']);
            $this->assertSame($list, $r['list'], 'arrays arrive as dispatched, key order and types too');
            $this->assertSame(
                ['class' => 'App\Models\User', 'exists' => true, 'id' => $got['user_id'], 'email' => $this->tag.'@example.test'],
                $r['user'],
                'SerializesModels: the worker loads the model committed with the jobs'
            );
            $this->assertSame(
                ['class' => 'Illuminate\Support\Carbon', 'at' => '2024-02-29T13:14:15.123456+01:00', 'tz' => 'Europe/Paris'],
                $r['when']
            );
            $this->assertSame("secret-{$n}", $r['secret'], 'a protected property');
            $this->assertSame("hidden\0-{$n}", $r['hidden'], 'a private property, with a NUL in its value too');
            $this->assertSame('Illuminate\Queue\CallQueuedHandler@call', $r['payload_job']);
            $this->assertSame('App\Jobs\Typed', $r['display_name']);
            $this->assertSame(['default', 'redis', 1], [$r['queue'], $r['connection'], $r['attempts']]);
            $ids[] = $r['job_id'];
            $uuids[] = $r['uuid'];
        }
        $this->assertSame($got['pushed_id'], $ids[2], 'Queue::push returns the id the worker sees');
        $this->assertCount(3, array_unique($ids));
        $this->assertCount(3, array_unique($uuids));
        $order = array_values(array_filter(array_map([$this, 'tagOf'], $this->records()), function ($t) use ($tags) {
            return in_array($t, $tags, true);
        }));
        $this->assertSame($tags, $order, 'in dispatch order');
    }

    public function test_rolled_back_transactions_and_savepoints_never_run(): void
    {
        $got = $this->scenario('rollback');
        $this->assertSame(0, $got['levels_after']);
        $kept = [$this->tag.'-kept-1', $this->tag.'-kept-2', $this->tag.'-kept-3'];
        // Staged after the rolled-back ones on the same queue, run by one
        // worker: once these ran, anything staged before them would have too.
        $this->waitRan($kept);
        $order = array_values(array_filter(array_map([$this, 'tagOf'], $this->records())));
        $this->assertSame($kept, $order, 'only the committed jobs ran, in order');
        $this->neverRan(array_map(function ($i) {
            return $this->tag.'-gone-'.$i;
        }, range(1, 5)));
        $this->assertSame(0, $this->stagedCount());
    }

    public function test_a_thousand_jobs_in_one_transaction_run_in_dispatch_order(): void
    {
        $n = 1000;
        $this->scenario('many', ['n' => $n, 'queue' => 'ordered']);
        $this->waitUntil("{$n} jobs to run", function () use ($n) {
            return count($this->recordsOf($this->tag)) >= $n;
        }, 90);
        usleep(1000000);
        $records = $this->recordsOf($this->tag);
        $this->assertCount($n, $records, 'each ran once');
        $this->assertSame(range(0, $n - 1), array_column($records, 'value'), 'in dispatch order');
        $this->assertSame(['ordered'], array_values(array_unique(array_column($records, 'queue'))));
        $this->assertCount($n, array_unique(array_column($records, 'uuid')));
    }

    public function test_jobs_staged_while_the_relay_is_stopped_run_once_it_starts(): void
    {
        $this->e2e->stopRelay();
        $this->scenario('many', ['n' => 3, 'tag' => $this->tag.'-a']);
        usleep(1000000);
        $this->assertSame([], $this->recordsOf($this->tag.'-a'));
        $rows = $this->e2e->owner()->query(
            "SELECT queue, job_class, options::text AS options, run_at, uuid IS NOT NULL AS has_uuid,"
            ." json_typeof(args) AS args, json_array_length(args) AS n FROM staged_jobs ORDER BY id"
        )->fetchAll();
        $row = ['queue' => 'default', 'job_class' => 'App\Jobs\Mark', 'options' => $this->e2e->rowOptions(), 'run_at' => null, 'has_uuid' => true, 'args' => 'array', 'n' => 1];
        $this->assertSame([$row, $row, $row], $rows, 'they wait in staged_jobs, one row each');

        // One relay run drains what was committed, then exits.
        $this->e2e->relayOnce();
        $this->assertSame(0, $this->stagedCount());
        $this->waitUntil('3 jobs', function () {
            return count($this->recordsOf($this->tag.'-a')) === 3;
        });

        $this->scenario('many', ['n' => 3, 'tag' => $this->tag.'-b']);
        usleep(1000000);
        $this->assertSame([], $this->recordsOf($this->tag.'-b'));
        $this->e2e->startRelay();
        $this->waitUntil('3 more jobs', function () {
            return count($this->recordsOf($this->tag.'-b')) === 3;
        });
        usleep(1000000);
        $this->assertSame([0, 1, 2], array_column($this->recordsOf($this->tag.'-a'), 'value'));
        $this->assertSame([0, 1, 2], array_column($this->recordsOf($this->tag.'-b'), 'value'));
    }
}
