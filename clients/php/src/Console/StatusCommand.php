<?php

namespace Stagedrain\Laravel\Console;

use Illuminate\Console\Command;
use InvalidArgumentException;
use Stagedrain\Laravel\RedisPrefix;
use Stagedrain\Laravel\StagedrainConnector;

/**
 * Runs the relay's `stagedrain status --json` in this app's environment and
 * sums it up; exits with its status (0 healthy, 1 needs attention, 2 bad
 * usage). The relay reads its settings from the environment, as it does when
 * it runs: STAGEDRAIN_PG_URL or DATABASE_URL, STAGEDRAIN_REDIS_URL or
 * REDIS_URL, and so on; this command adds STAGEDRAIN_FORMAT=laravel and
 * STAGEDRAIN_LARAVEL_PREFIX (this app's, see stagedrain:prefix) unless they
 * are set.
 */
class StatusCommand extends Command
{
    protected $signature = 'stagedrain:status
        {args?* : more arguments for stagedrain status, after a lone double dash}
        {--connection= : the stagedrain queue connection (default: QUEUE_CONNECTION\'s, or the only one)}
        {--json : print stagedrain status --json\'s object as it is}';

    protected $description = 'Say whether the stagedrain relay works and how far behind it is (stagedrain status)';

    public function handle(): int
    {
        try {
            [, $config] = StagedConnection::find($this->laravel['config'], $this->option('connection'));
            $prefix = RedisPrefix::of($this->laravel['config'], StagedrainConnector::worker($config));
            $bin = self::binary();
        } catch (InvalidArgumentException $e) {
            $this->error($e->getMessage());

            return 2;
        }
        $env = getenv();
        $env['STAGEDRAIN_FORMAT'] = $env['STAGEDRAIN_FORMAT'] ?? 'laravel';
        if (! isset($env['STAGEDRAIN_LARAVEL_PREFIX'])) {
            $env['STAGEDRAIN_LARAVEL_PREFIX'] = $prefix;
        } elseif ($env['STAGEDRAIN_LARAVEL_PREFIX'] !== $prefix) {
            $this->warn(sprintf(
                'STAGEDRAIN_LARAVEL_PREFIX is "%s", but this app\'s workers read keys under "%s"',
                $env['STAGEDRAIN_LARAVEL_PREFIX'], $prefix
            ));
        }

        $ran = self::runJson(array_merge([$bin, 'status', '--json'], $this->argument('args')), $env);
        if ($ran === null) {
            $this->error("cannot run {$bin}");

            return 2;
        }
        [$code, $json] = $ran;
        $status = json_decode($json, true);
        if (! is_array($status) || ! array_key_exists('healthy', $status)) {
            if ($code === 0 || $code === 1) {
                $this->error("{$bin} status --json printed no status object: ".trim($json));

                return 2;
            }

            return $code; // it said why on stderr
        }
        if ($this->option('json')) {
            $this->output->writeln(trim($json), \Symfony\Component\Console\Output\OutputInterface::OUTPUT_RAW);

            return $code;
        }
        $this->summary($status, $env['STAGEDRAIN_LARAVEL_PREFIX']);

        return $code;
    }

    private function summary(array $status, string $prefix): void
    {
        $backlog = $status['backlog'] ?? null;
        $dead = $status['dead'] ?? null;
        $this->line(sprintf('backlog   %s', is_array($backlog)
            ? (($backlog['estimated'] ?? false) ? 'about ' : '').number_format((int) $backlog['staged']).' staged'
            : 'unknown'));
        $this->line(sprintf('dead      %s', is_array($dead) ? number_format((int) $dead['rows']).' rows' : 'unknown'));
        $this->line(sprintf('prefix    "%s" (--laravel-prefix)', $prefix));
        if ($status['healthy']) {
            $this->line('healthy');

            return;
        }
        $this->line('needs attention:');
        foreach ((array) ($status['problems'] ?? []) as $problem) {
            $this->line('  '.$problem);
        }
    }

    /** The relay binary: $STAGEDRAIN_BIN, else `stagedrain` on PATH. */
    private static function binary(): string
    {
        $bin = getenv('STAGEDRAIN_BIN');
        if ($bin !== false && $bin !== '') {
            if (! is_file($bin) || ! is_executable($bin)) {
                throw new InvalidArgumentException("STAGEDRAIN_BIN is {$bin}, which is not an executable file");
            }

            return $bin;
        }
        foreach (explode(PATH_SEPARATOR, (string) getenv('PATH')) as $dir) {
            if ($dir !== '' && is_file($dir.'/stagedrain') && is_executable($dir.'/stagedrain')) {
                return $dir.'/stagedrain';
            }
        }
        throw new InvalidArgumentException(
            'no stagedrain binary: none on PATH, and STAGEDRAIN_BIN is not set (make install puts it on PATH)'
        );
    }

    /** @return array{0: int, 1: string}|null  its exit status and stdout (its stderr goes to ours); null if it could not start */
    private static function runJson(array $argv, array $env): ?array
    {
        $stderr = defined('STDERR') ? STDERR : ['file', '/dev/null', 'w'];
        $proc = proc_open($argv, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => $stderr], $pipes, null, $env);
        if (! is_resource($proc)) {
            return null;
        }
        $out = stream_get_contents($pipes[1]);
        fclose($pipes[1]);

        return [proc_close($proc), (string) $out];
    }
}
