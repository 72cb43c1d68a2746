<?php

namespace Stagedrain\Laravel\Tests;

use DateInterval;
use DateTimeImmutable;
use Exception;
use Illuminate\Queue\CallQueuedClosure;
use Illuminate\Queue\Events\JobQueued;
use Illuminate\Queue\InvalidPayloadException;
use LogicException;
use RuntimeException;
use Stagedrain\Laravel\NotMigrated;
use Stagedrain\Laravel\NotStageable;
use Stagedrain\Laravel\StagedQueue;

require_once __DIR__.'/TestCase.php';

/** StagedQueue that keeps every payload createPayload returned, to compare with the rows. */
class RecordingStagedQueue extends StagedQueue
{
    public $payloads = [];

    protected function createPayload(...$args)
    {
        return $this->payloads[] = parent::createPayload(...$args);
    }
}

class StagedQueueTest extends TestCase
{
    private function recording(): RecordingStagedQueue
    {
        $queue = new RecordingStagedQueue($this->app(), 'default', self::PREFIX);
        $queue->setContainer($this->container);
        $queue->setConnectionName('staged');

        return $queue;
    }

    public function testStagesAsTheAppRole(): void
    {
        $this->assertSame('app', $this->app()->selectOne('SELECT current_user AS u')->u);
        $this->assertInstanceOf(StagedQueue::class, $this->staged());
        $this->assertSame('default', $this->staged()->getDatabase()->getName());
    }

    public function testPushWritesTheRowWithTheFrameworksPayload(): void
    {
        $queue = $this->recording();
        $id = $queue->push(new SendInvoice(['id' => 7, 'lines' => [1, 2]], 'é/ü'), '', 'invoices');

        [$row] = $this->rows();
        [$payload] = $queue->payloads;
        $this->assertSame('invoices', $row->queue);
        $this->assertSame(SendInvoice::class, $row->job_class);
        $this->assertSame('{"serialized":true,"laravel_prefix":"unit_database_"}', $row->options);
        $this->assertNull($row->run_at);
        // args holds createPayload's bytes, unchanged.
        $this->assertSame($payload, self::unwrap($row));

        $decoded = json_decode($payload, true);
        $this->assertSame($row->uuid, $decoded['uuid']);
        $this->assertSame($id, $decoded['id']);
        $this->assertMatchesRegularExpression('/\A[A-Za-z0-9]{32}\z/', $id);
        $this->assertSame(0, $decoded['attempts']);
        $this->assertSame('Illuminate\Queue\CallQueuedHandler@call', $decoded['job']);
        $this->assertSame(SendInvoice::class, $decoded['displayName']);
        $this->assertSame(3, $decoded['maxTries']);
        $this->assertSame('1,5', $decoded['backoff']);
        $this->assertSame(30, $decoded['timeout']);
        $this->assertSame(SendInvoice::class, $decoded['data']['commandName']);
        // What RedisQueue::createPayloadArray adds comes last, as there.
        $this->assertSame(['id', 'attempts'], array_slice(array_keys($decoded), -2));
    }

    public function testPrivateAndProtectedPropertiesSurviveTheRow(): void
    {
        $job = new SendInvoice(['id' => 7, 'total' => '12.50'], "private\tnote");
        $this->staged()->push($job);

        [$row] = $this->rows();
        $command = json_decode(self::unwrap($row), true)['data']['command'];
        $this->assertStringContainsString("\0*\0order", $command);
        $this->assertStringContainsString("\0".SendInvoice::class."\0note", $command);
        // args holds the NUL as the escape json_encode wrote, inside the payload string.
        $this->assertStringContainsString('\\\\u0000', $row->args);

        $back = unserialize($command);
        $this->assertEquals($job, $back);
        $this->assertSame("private\tnote", $back->note());
    }

    public function testStringJobAndData(): void
    {
        $queue = $this->recording();
        $data = ['to' => 'a@example.com', 'n' => 2, 'zeta' => 1, 'alpha' => ['f' => 1.0e20, 's' => "a\0b"]];
        $id = $queue->push('App\Jobs\Mailer@send', $data, 'mail');

        [$row] = $this->rows();
        // The json column holds [payload] as written: the payload's text (keys
        // in their order, 1.0e+20, the NUL's escape) is Laravel's.
        $this->assertSame(json_encode($queue->payloads, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES), $row->args);
        $this->assertStringContainsString('"alpha":{"f":1.0e+20,"s":"a\\u0000b"}', self::unwrap($row));
        $payload = json_decode(self::unwrap($row), true);
        $this->assertSame('mail', $row->queue);
        $this->assertSame('App\Jobs\Mailer', $row->job_class);
        $this->assertSame('App\Jobs\Mailer@send', $payload['job']);
        $this->assertSame($data, $payload['data']);
        $this->assertSame($id, $payload['id']);
        $this->assertSame($row->uuid, $payload['uuid']);
    }

    public function testLaterWithIntDateTimeAndDateInterval(): void
    {
        $queue = $this->recording();
        $at = new DateTimeImmutable('@'.(time() + 3600));
        $before = time();
        $queue->later(60, new AfterCommitJob, '', 'slow');
        $queue->later($at, 'App\Jobs\Report@run', [1]);
        $queue->later(new DateInterval('PT90S'), new AfterCommitJob);
        $after = time();

        [$int, $date, $interval] = $this->rows();
        $this->assertSame('slow', $int->queue);
        $this->assertSame('default', $date->queue);
        $this->assertGreaterThanOrEqual($before + 60, (int) $int->run_at);
        $this->assertLessThanOrEqual($after + 60, (int) $int->run_at);
        $this->assertSame($at->getTimestamp(), (int) $date->run_at);
        $this->assertGreaterThanOrEqual($before + 90, (int) $interval->run_at);
        $this->assertLessThanOrEqual($after + 90, (int) $interval->run_at);
        $this->assertSame($queue->payloads, array_map([self::class, 'unwrap'], [$int, $date, $interval]));
    }

    public function testPushReturnsThePayloadIdAndRaisesJobQueued(): void
    {
        $seen = [];
        $this->events->listen(JobQueued::class, function (JobQueued $event) use (&$seen) {
            $seen[] = [$event->connectionName, $event->id];
        });
        $id = $this->staged()->push(new AfterCommitJob);

        $this->assertSame([['staged', $id]], $seen);
        $this->assertSame($id, json_decode(self::unwrap($this->rows()[0]), true)['id']);
    }

    public function testCommittedTransactionKeepsItsJobs(): void
    {
        $ids = $this->app()->transaction(function () {
            return [$this->staged()->push(new AfterCommitJob), $this->staged()->push('A@b', [])];
        });

        $rows = $this->rows();
        $this->assertCount(2, $rows);
        $this->assertSame($ids, array_map(function ($row) {
            return json_decode(self::unwrap($row), true)['id'];
        }, $rows));
    }

    public function testRolledBackTransactionStagesNothing(): void
    {
        try {
            $this->app()->transaction(function () {
                $this->staged()->push(new AfterCommitJob);
                $this->staged()->later(10, 'A@b', []);
                $this->staged()->bulk(['A@b', 'C@d']);
                throw new RuntimeException('roll back');
            });
            $this->fail('the transaction did not throw');
        } catch (RuntimeException $e) {
            $this->assertSame('roll back', $e->getMessage());
        }
        $this->assertSame([], $this->rows());
    }

    public function testRolledBackSavepointTakesOnlyItsJobs(): void
    {
        $this->app()->transaction(function () {
            $this->staged()->push('Outer@before', []);
            try {
                $this->app()->transaction(function () {
                    $this->staged()->push('Inner@job', []);
                    throw new RuntimeException('roll back the savepoint');
                });
            } catch (RuntimeException $e) {
            }
            $this->staged()->push('Outer@after', []);
        });

        $this->assertSame(['Outer', 'Outer'], array_column($this->rows(), 'job_class'));
        $this->assertSame(['Outer@before', 'Outer@after'], array_map(function ($row) {
            return json_decode(self::unwrap($row), true)['job'];
        }, $this->rows()));
    }

    public function testAfterCommitJobIsWrittenInsideTheTransaction(): void
    {
        $committed = null;
        $this->app()->transaction(function () use (&$committed) {
            $this->staged()->push(new AfterCommitJob);
            // Written now (the app's own connection sees it), not queued to after COMMIT...
            $this->assertSame(1, (int) $this->app()->selectOne('SELECT count(uuid) AS n FROM staged_jobs')->n);
            // ...and invisible to everyone else until COMMIT.
            $this->assertSame([], $this->rows());
            $committed = true;
        });
        $this->assertTrue($committed);
        $this->assertCount(1, $this->rows());

        $this->admin()->delete('DELETE FROM staged_jobs');
        try {
            $this->app()->transaction(function () {
                $this->staged()->push(new AfterCommitJob);
                throw new RuntimeException('roll back');
            });
        } catch (RuntimeException $e) {
        }
        $this->assertSame([], $this->rows());
    }

    public function testPushRaw(): void
    {
        $payload = '{"uuid":"0b5b1f0e-9c3a-4d57-8f0e-1d2c3b4a5f60","displayName":"App\\\\Jobs\\\\Raw",'
            .'"job":"App\\\\Jobs\\\\Raw@handle","data":{"x":"a/b é"},"id":"rawid","attempts":0}';
        $this->assertSame('rawid', $this->staged()->pushRaw($payload, 'raw'));

        [$row] = $this->rows();
        $this->assertSame('raw', $row->queue);
        $this->assertSame('App\Jobs\Raw', $row->job_class);
        $this->assertSame('0b5b1f0e-9c3a-4d57-8f0e-1d2c3b4a5f60', $row->uuid);
        $this->assertSame($payload, self::unwrap($row));
        $this->assertNull($row->run_at);
    }

    /** @return array<string, array{string}> */
    public function badRawPayloads(): array
    {
        $good = ['uuid' => '0b5b1f0e-9c3a-4d57-8f0e-1d2c3b4a5f60', 'displayName' => 'X', 'job' => 'X@y', 'id' => 'i', 'attempts' => 0];
        $without = function (string $key) use ($good) {
            unset($good[$key]);

            return json_encode($good);
        };
        $with = function (string $key, $value) use ($good) {
            $good[$key] = $value;

            return json_encode($good);
        };

        return [
            'not json' => ['{"uuid":'],
            'an array' => ['[1,2]'],
            'a string' => ['"x"'],
            'no uuid' => [$without('uuid')],
            'upper-case uuid' => [$with('uuid', '0B5B1F0E-9C3A-4D57-8F0E-1D2C3B4A5F60')],
            'not a uuid' => [$with('uuid', 'nope')],
            'no displayName' => [$without('displayName')],
            'empty job' => [$with('job', '')],
            'job not a string' => [$with('job', ['X', 'y'])],
            'no id' => [$without('id')],
            'negative attempts' => [$with('attempts', -1)],
        ];
    }

    /** @dataProvider badRawPayloads */
    public function testBadRawPayloadRaisesAndTheTransactionGoesOn(string $payload): void
    {
        $this->app()->transaction(function () use ($payload) {
            try {
                $this->staged()->pushRaw($payload);
                $this->fail('no NotStageable');
            } catch (NotStageable $e) {
                $this->assertInstanceOf(InvalidPayloadException::class, $e);
            }
            $this->staged()->push('After@bad', []);
        });
        $this->assertSame(['After'], array_column($this->rows(), 'job_class'));
    }

    public function testBulk(): void
    {
        $queue = $this->recording();
        $ids = $queue->bulk([new AfterCommitJob, 'App\Jobs\Two@run', new SendInvoice([], 'x')], ['d' => 1], 'bulk');

        $rows = $this->rows();
        $this->assertSame(['bulk', 'bulk', 'bulk'], array_column($rows, 'queue'));
        $this->assertSame([AfterCommitJob::class, 'App\Jobs\Two', SendInvoice::class], array_column($rows, 'job_class'));
        $this->assertSame($queue->payloads, array_map([self::class, 'unwrap'], $rows));
        $this->assertSame(array_map(function ($p) {
            return json_decode($p, true)['id'];
        }, $queue->payloads), $ids);
        $this->assertSame(['d' => 1], json_decode($queue->payloads[1], true)['data']);
    }

    public function testBulkOfManyRowsKeepsTheirOrder(): void
    {
        $jobs = [];
        for ($i = 0; $i < 2500; $i++) {
            $jobs[] = "App\\Jobs\\N$i@run";
        }
        $this->assertCount(2500, $this->staged()->bulk($jobs));
        $classes = array_column($this->rows(), 'job_class');
        $this->assertSame(array_map(function ($j) {
            return explode('@', $j)[0];
        }, $jobs), $classes);
    }

    public function testBulkWithOneUnstageableJobStagesNone(): void
    {
        $file = fopen('php://memory', 'r');
        try {
            $this->staged()->bulk([new AfterCommitJob, new HoldsJob($file)]);
            $this->fail('no NotStageable');
        } catch (NotStageable $e) {
            $this->assertStringContainsString(HoldsJob::class, $e->getMessage());
        } finally {
            fclose($file);
        }
        $this->assertSame([], $this->rows());
    }

    public function testSizeCountsTheQueuesRowsNotYetRelayed(): void
    {
        $this->staged()->push('A@b', [], 'sized');
        $this->staged()->push('A@b', [], 'sized');
        $this->staged()->push('A@b', []);

        $this->assertSame(2, $this->staged()->size('sized'));
        $this->assertSame(1, $this->staged()->size());
        $this->assertSame(0, $this->staged()->size('empty'));
    }

    public function testPopSaysTheWorkerRunsOnRedis(): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('queue:work redis');
        $this->staged()->pop();
    }

    public function testResourcePropertyRaisesNamingTheClassAndPath(): void
    {
        $open = fopen('php://memory', 'r');
        $closed = fopen('php://memory', 'r');
        fclose($closed);
        $cases = [
            '$job->held' => $open,
            "\$job->held['files'][1]" => ['files' => ['ok', $closed]],
            '$job->held->held' => new HoldsJob($open),
            "\$job->held->kept['f']" => new SleepyJob(['f' => $open], null),
        ];

        $this->app()->transaction(function () use ($cases) {
            foreach ($cases as $path => $held) {
                try {
                    $this->staged()->push(new HoldsJob($held));
                    $this->fail("no NotStageable for $path");
                } catch (NotStageable $e) {
                    $this->assertStringContainsString(HoldsJob::class, $e->getMessage());
                    $this->assertStringContainsString($path.' is a resource', $e->getMessage());
                }
            }
            // Nothing reached the database: the transaction goes on.
            $this->staged()->push('After@resource', []);
        });
        fclose($open);
        $this->assertSame(['After'], array_column($this->rows(), 'job_class'));
    }

    public function testWhatSerializeLeavesOutIsNotChecked(): void
    {
        $file = fopen('php://memory', 'r');
        // __sleep() leaves $dropped out, so serialize() never sees the resource.
        $this->staged()->push(new HoldsJob(new SleepyJob('kept', $file)));
        fclose($file);
        $this->assertCount(1, $this->rows());
    }

    public function testCyclesAreWalkedOnce(): void
    {
        $job = new CyclicJob;
        $this->staged()->push($job);
        $back = unserialize(json_decode(self::unwrap($this->rows()[0]), true)['data']['command']);
        // Laravel serializes a clone, whose $self is still the original.
        $this->assertSame($back->self, $back->self->self);
        $this->assertSame(1, $back->list['a']);
    }

    public function testClosurePropertyRaisesSerializesOwnErrorAndStagesNothing(): void
    {
        $this->app()->transaction(function () {
            try {
                $this->staged()->push(new HoldsJob(static function () {
                    return 1;
                }));
                $this->fail('no exception');
            } catch (Exception $e) {
                $this->assertNotInstanceOf(NotStageable::class, $e);
                $this->assertStringContainsString("Serialization of 'Closure' is not allowed", $e->getMessage());
            }
            $this->staged()->push('After@closure', []);
        });
        $this->assertSame(['After'], array_column($this->rows(), 'job_class'));
    }

    public function testClosureJobStagesAndComesBack(): void
    {
        $factor = 6;
        $this->staged()->push(static function () use ($factor) {
            return $factor * 7;
        });

        [$row] = $this->rows();
        $payload = json_decode(self::unwrap($row), true);
        $this->assertStringStartsWith('Closure (', $row->job_class);
        $this->assertSame($row->job_class, $payload['displayName']);
        $command = unserialize($payload['data']['command']);
        $this->assertInstanceOf(CallQueuedClosure::class, $command);
        $this->assertSame(42, $command->closure->getClosure()());
    }

    public function testClosureJobHoldingAResourceRaises(): void
    {
        $file = fopen('php://memory', 'r');
        try {
            $this->staged()->push(static function () use ($file) {
                return $file;
            });
            $this->fail('no NotStageable');
        } catch (NotStageable $e) {
            $this->assertStringContainsString('a Closure job', $e->getMessage());
        } finally {
            fclose($file);
        }
        $this->assertSame([], $this->rows());
    }

    /** A schema without staged_jobs (42P01), and one whose staged_jobs has no uuid column (42703). */
    public function unmigratedSchemas(): array
    {
        return ['the table is missing' => ['unmigrated', '42P01'], 'the uuid column is missing' => ['old', '42703']];
    }

    /** @dataProvider unmigratedSchemas */
    public function testNotMigrated(string $schema, string $sqlstate): void
    {
        try {
            $this->staged($schema)->push('A@b', []);
            $this->fail('no NotMigrated');
        } catch (NotMigrated $e) {
            $this->assertStringContainsString('stagedrain migrate', $e->getMessage());
            $this->assertSame($sqlstate, $e->getPrevious()->getCode());
        }
    }
}
