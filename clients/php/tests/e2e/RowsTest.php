<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * Bad input: a job that cannot be serialized raises at dispatch() and
 * stages nothing, the transaction going on; a row the relay cannot push is
 * dead-lettered with the reason and the rows after it still run.
 */
final class RowsTest extends E2ETestCase
{
    public function test_a_job_that_cannot_be_serialized_raises_at_dispatch_and_stages_nothing(): void
    {
        $this->e2e->stopRelay();
        $got = $this->scenario('unstageable');
        $this->assertSame(0, $got['level']);
        $caught = $got['caught'];
        $this->assertSame('Exception', $caught['closure']['class']);
        $this->assertSame("Serialization of 'Closure' is not allowed", $caught['closure']['message']);
        foreach (['resource', 'resource-autocommit', 'raw'] as $what) {
            $this->assertIsArray($caught[$what], "{$what} raised");
            $this->assertSame('Stagedrain\Laravel\NotStageable', $caught[$what]['class'], $what);
            $this->assertContains('Illuminate\Queue\InvalidPayloadException', $caught[$what]['parents'], $what);
        }
        $this->assertStringContainsString('resource', $caught['resource']['message']);

        $rows = $this->e2e->owner()->query('SELECT job_class FROM staged_jobs ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN);
        $this->assertSame(['App\Jobs\Mark', 'App\Jobs\Mark'], $rows, 'only the two good jobs were staged');
        $this->e2e->startRelay();
        $this->waitRan([$this->tag.'-before', $this->tag.'-after']);
        $this->assertCount(2, $this->records(), 'nothing else ran');
    }

    public function test_a_serialized_row_the_relay_cannot_push_is_dead_lettered_and_the_drain_goes_on(): void
    {
        $this->expectDead = true;
        $this->e2e->stopRelay();
        $db = $this->e2e->appDb();
        $recorder = $db->prepare("INSERT INTO staged_jobs (queue, job_class, args) VALUES ('default', 'App\\Jobs\\Recorder@handle', CAST(? AS json))");
        $serialized = $db->prepare(
            "INSERT INTO staged_jobs (queue, job_class, args, options, uuid) VALUES ('default', ?, CAST(? AS json), '{\"serialized\": true}', CAST(? AS uuid))"
        );
        $uuid = '2b5ef4a4-54a6-4b8e-9f0a-0f3b0e6c1d01';
        $recorder->execute([json_encode([['tag' => $this->tag.'-1']])]);
        // Not JSON at all.
        $serialized->execute(['App\Jobs\Mark', json_encode(['{"uuid": "'.$uuid.'", "job": broken']), $uuid]);
        // A JSON object, but its uuid is not the row's.
        $payload = ['uuid' => '00000000-0000-4000-8000-000000000000', 'displayName' => 'App\Jobs\Mark', 'job' => 'Illuminate\Queue\CallQueuedHandler@call',
            'data' => ['commandName' => 'App\Jobs\Mark', 'command' => 'O:13:"App\Jobs\Mark":0:{}'], 'id' => 'x', 'attempts' => 0];
        $serialized->execute(['App\Jobs\Mark', json_encode([json_encode($payload)]), $uuid]);
        $recorder->execute([json_encode([['tag' => $this->tag.'-2']])]);
        $this->scenario('many', ['n' => 2, 'tag' => $this->tag.'-3']);

        $this->e2e->startRelay();
        $this->waitRan([$this->tag.'-1', $this->tag.'-2']);
        $this->waitUntil('the dispatched jobs after them', function () {
            return count($this->recordsOf($this->tag.'-3')) === 2;
        });
        $this->assertSame(0, $this->stagedCount());

        $dead = $this->e2e->owner()->query('SELECT job_class, options::text AS options, reason FROM staged_jobs_dead ORDER BY id')->fetchAll();
        $this->assertCount(2, $dead, 'both bad rows, and nothing else');
        foreach ($dead as $row) {
            $this->assertSame(['App\Jobs\Mark', '{"serialized": true}'], [$row['job_class'], $row['options']]);
            $this->assertNotSame('', trim($row['reason']));
        }
        $this->assertStringContainsString('not json', $dead[0]['reason']);
        $this->assertStringContainsString('uuid', $dead[1]['reason']);
        $this->assertSame([$this->tag.'-1', $this->tag.'-2', $this->tag.'-3', $this->tag.'-3'], array_map([$this, 'tagOf'], $this->records()), 'the drain went on, in order');
    }
}
