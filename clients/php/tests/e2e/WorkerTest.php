<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * A worker started on a stagedrain connection (the bare `queue:work` of a
 * Supervisor or Forge set-up, with QUEUE_CONNECTION=staged) would run no job:
 * the real artisan refuses it at once with one line saying what to run, and
 * exit status 1. Workers on the Redis connection start as before.
 */
final class WorkerTest extends E2ETestCase
{
    /** @return array<string, array{0: string[], 1: string}> */
    public function refused(): array
    {
        $default = ' (the default, QUEUE_CONNECTION)';

        return [
            'bare queue:work' => [['queue:work'], 'queue:work: "staged"'.$default],
            'bare, --once' => [['queue:work', '--once'], 'queue:work: "staged"'.$default],
            'named' => [['queue:work', 'staged'], 'queue:work: "staged"'],
            'named, options first' => [['queue:work', '--queue', 'default', '--once', 'staged'], 'queue:work: "staged"'],
            'queue:listen' => [['queue:listen'], 'queue:listen: "staged"'.$default],
            'queue:listen, named' => [['queue:listen', 'staged', '--queue=x'], 'queue:listen: "staged"'],
        ];
    }

    /** @dataProvider refused */
    public function test_a_worker_on_a_stagedrain_connection_is_refused_with_one_line(array $args, string $start): void
    {
        [$status, $out, $err] = $this->e2e->exec(array_merge(['php', 'artisan'], $args), [], 20.0);
        $this->assertSame(1, $status, "exit status\n{$out}{$err}");
        $lines = array_values(array_filter(array_map('trim', explode("\n", $out.$err)), 'strlen'));
        $command = strpos($start, 'queue:listen') === 0 ? 'queue:listen' : 'queue:work';
        $this->assertSame(
            [$start.' is a stagedrain connection, which only stages jobs: run the worker on the Redis connection '
                ."the relay pushes to: php artisan {$command} redis"],
            $lines,
            'one line on the console'
        );
    }

    public function test_a_worker_on_the_redis_connection_starts(): void
    {
        // --once on empty queues: one look, then exit 0.
        [$status, $out, $err] = $this->e2e->exec(['php', 'artisan', 'queue:work', 'redis', '--once', '--sleep=0', '--queue=none'], [], 20.0);
        $this->assertSame(0, $status, $out.$err);
        // QUEUE_CONNECTION=redis: the bare command works Redis.
        [$status, $out, $err] = $this->e2e->exec(['php', 'artisan', 'queue:work', '--once', '--sleep=0', '--queue=none'], ['QUEUE_CONNECTION' => 'redis'], 20.0);
        $this->assertSame(0, $status, $out.$err);
    }

    public function test_other_commands_and_bad_arguments_are_left_alone(): void
    {
        [$status, $out] = $this->e2e->exec(['php', 'artisan', 'queue:failed']);
        $this->assertSame(0, $status, $out);
        // The console's own error for an unknown option, not the refusal.
        [$status, $out, $err] = $this->e2e->exec(['php', 'artisan', 'queue:work', '--no-such-option']);
        $this->assertSame(1, $status);
        $this->assertStringContainsString('The "--no-such-option" option does not exist.', $out.$err);
        $this->assertStringNotContainsString('stagedrain', $out.$err);
    }
}
