<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

use PDO;
use Redis;
use RuntimeException;

/**
 * The end-to-end world, built once per PHPUnit run and shared by every case:
 * a Laravel 8 app made in $TEST_DIR/php-e2e/app as the README's doc test
 * makes one (tests/skeleton/new-app: Debian's php-laravel-framework), the
 * files under support/app over it (its jobs, its scenarios, the `staged`
 * connection), the package required from a path repository as the README
 * says, one unmodified
 * `php artisan queue:work redis` and one relay (--format laravel), both
 * stopped by PID when the run ends.
 */
final class E2E
{
    /** The app's name, and so the Redis key prefix Laravel derives from it. */
    public const APP_NAME = 'Stagedrain E2E';
    public const PREFIX = 'stagedrain_e2e_database_';
    public const RAN = self::PREFIX.'e2e:ran';
    public const QUEUES = 'default,x,ordered';

    /** @var self|null */
    private static $world;

    /** @var string */
    public $dir;
    /** @var string */
    public $app;
    /** @var array<string, array{0: resource, 1: int}> */
    private $procs = [];
    /** @var Redis|null */
    private $redis;
    /** @var PDO|null */
    private $owner;
    /** @var PDO|null */
    private $appDb;

    /** @var \Throwable|null why the world could not be built */
    private static $broken;

    public static function world(): self
    {
        if (self::$broken !== null) {
            throw new RuntimeException('the e2e app could not be set up (see the first failure)', 0, self::$broken);
        }
        if (self::$world === null) {
            $world = new self();
            register_shutdown_function(static function () use ($world) {
                $world->shutdown();
            });
            try {
                $world->build();
                $world->startWorker();
                $world->startRelay();
            } catch (\Throwable $e) {
                self::$broken = $e;
                throw $e;
            }
            self::$world = $world;
        }

        return self::$world;
    }

    private function __construct()
    {
        foreach (['TEST_DIR', 'TEST_PG_URL', 'TEST_REDIS_URL', 'STAGEDRAIN_BIN', 'STAGEDRAIN_APP_PG_URL', 'STAGEDRAIN_RELAY_PG_URL'] as $var) {
            if ((string) getenv($var) === '') {
                throw new RuntimeException("{$var} is not set: run under tests/services.sh run, through clients/php/tests/run");
            }
        }
        $this->dir = getenv('TEST_DIR').'/php-e2e';
        $this->app = $this->dir.'/app';
    }

    public static function env(string $name): string
    {
        return (string) getenv($name);
    }

    public static function clientDir(): string
    {
        return dirname(__DIR__, 3);
    }

    // ------------------------------------------------------------------
    // The app

    private function build(): void
    {
        $this->run(['rm', '-rf', $this->dir]);
        if (! mkdir($this->dir.'/composer-home', 0777, true)) {
            throw new RuntimeException("cannot make {$this->dir}/composer-home");
        }
        $this->run(['bash', self::clientDir().'/tests/skeleton/new-app', $this->app], $this->composerEnv(), $this->dir.'/new-app.log');
        $this->run(['cp', '-R', __DIR__.'/app/.', $this->app]);
        $this->prepareDatabase();
        // As the README says: the package from a path repository, offline
        // (packagist.org off, Laravel is Debian's, declared by the app's
        // `provide`); composer's post-autoload-dump discovers its provider.
        foreach ([['config', 'repositories.stagedrain', 'path', self::clientDir()], ['require', 'stagedrain/laravel:@dev']] as $args) {
            $this->run(array_merge(['composer', '--no-interaction', '--working-dir='.$this->app], $args), $this->composerEnv(), $this->dir.'/composer.log');
        }
        // The relay runs with what the app says; the keys the tests read are PREFIX's.
        $prefix = $this->run(['php', $this->app.'/artisan', 'stagedrain:prefix'], $this->appEnv());
        if ($prefix !== self::PREFIX."\n") {
            throw new RuntimeException('php artisan stagedrain:prefix printed '.json_encode($prefix).', not '.self::PREFIX);
        }
    }

    private function composerEnv(): array
    {
        return $this->appEnv() + [
            'COMPOSER_HOME' => $this->dir.'/composer-home',
            'COMPOSER_CACHE_DIR' => $this->dir.'/composer-home/cache',
            'COMPOSER_ALLOW_SUPERUSER' => '1',
            'COMPOSER_DISABLE_NETWORK' => '1',
        ];
    }

    /** The options of the rows the app stages, as json_encode wrote them. */
    public function rowOptions(): string
    {
        return '{"serialized":true,"laravel_prefix":"'.self::PREFIX.'"}';
    }

    /** The environment of everything the app runs: artisan, the worker. */
    public function appEnv(): array
    {
        $env = getenv();
        $env['QUEUE_CONNECTION'] = 'staged';
        $env['APP_ENV'] = 'local';
        $env['APP_NAME'] = self::APP_NAME;
        $env['DATABASE_URL'] = self::env('STAGEDRAIN_APP_PG_URL');
        $env['REDIS_URL'] = self::env('TEST_REDIS_URL');

        return $env;
    }

    /** Tables the app uses besides staged_jobs, made by the owner, granted to app. */
    private function prepareDatabase(): void
    {
        $this->owner()->exec(<<<'SQL'
            SET client_min_messages = warning;
            DROP TABLE IF EXISTS failed_jobs, php_e2e_users;
            CREATE TABLE failed_jobs (
                id bigserial PRIMARY KEY,
                uuid varchar(255) NOT NULL UNIQUE,
                connection text NOT NULL,
                queue text NOT NULL,
                payload text NOT NULL,
                exception text NOT NULL,
                failed_at timestamp(0) without time zone NOT NULL DEFAULT CURRENT_TIMESTAMP
            );
            GRANT SELECT, INSERT, DELETE ON failed_jobs TO app;
            GRANT USAGE ON SEQUENCE failed_jobs_id_seq TO app;
            CREATE TABLE php_e2e_users (id bigserial PRIMARY KEY, email text NOT NULL);
            GRANT SELECT, INSERT, UPDATE, DELETE ON php_e2e_users TO app;
            GRANT USAGE ON SEQUENCE php_e2e_users_id_seq TO app;
        SQL);
    }

    /**
     * php artisan e2e:scenario NAME JSON in the app, as a child process;
     * returns the scenario's result.
     */
    public function scenario(string $name, array $input = [], array $env = []): array
    {
        $out = $this->run(
            ['php', $this->app.'/artisan', 'e2e:scenario', $name, json_encode((object) $input, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION)],
            $env + $this->appEnv()
        );
        $result = json_decode($out, true);
        if (! is_array($result)) {
            throw new RuntimeException("scenario {$name} printed no JSON: {$out}");
        }

        return $result;
    }

    // ------------------------------------------------------------------
    // Processes

    public function startWorker(): void
    {
        $this->spawn('worker', [
            'php', $this->app.'/artisan', 'queue:work', 'redis', '--queue='.self::QUEUES, '--sleep=0.1',
        ], $this->appEnv());
    }

    public function startRelay(): void
    {
        $this->spawn('relay', $this->relayArgv());
    }

    public function stopRelay(): void
    {
        $this->stop('relay');
    }

    public function relayRunning(): bool
    {
        return isset($this->procs['relay']);
    }

    /** Relays every committed row, then exits; fails on a non-zero status. */
    public function relayOnce(): void
    {
        $this->run(array_merge($this->relayArgv(), ['--once']), null, $this->dir.'/relay-once.log');
    }

    private function relayArgv(): array
    {
        return [
            self::env('STAGEDRAIN_BIN'), '--pg-url', self::env('STAGEDRAIN_RELAY_PG_URL'),
            '--redis-url', self::env('TEST_REDIS_URL'), '--format', 'laravel',
            '--laravel-prefix', self::PREFIX, '--log-level', 'warn',
        ];
    }

    public function log(string $name): string
    {
        return $this->dir.'/'.$name.'.log';
    }

    private function spawn(string $name, array $argv, ?array $env = null): void
    {
        if (isset($this->procs[$name])) {
            return;
        }
        $log = $this->log($name);
        $proc = proc_open($argv, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']], $pipes, $this->dir, $env);
        if (! is_resource($proc)) {
            throw new RuntimeException("cannot start {$name}");
        }
        $this->procs[$name] = [$proc, proc_get_status($proc)['pid']];
        usleep(200000);
        if (! proc_get_status($proc)['running']) {
            unset($this->procs[$name]);
            throw new RuntimeException("{$name} exited at once:\n".self::tail($log));
        }
    }

    /** SIGTERM, then gone within 15 s or SIGKILL. */
    private function stop(string $name): void
    {
        if (! isset($this->procs[$name])) {
            return;
        }
        [$proc, $pid] = $this->procs[$name];
        unset($this->procs[$name]);
        posix_kill($pid, SIGTERM);
        $deadline = microtime(true) + 15;
        while (proc_get_status($proc)['running']) {
            if (microtime(true) > $deadline) {
                fwrite(STDERR, "e2e: {$name} (pid {$pid}) ignored SIGTERM for 15 s; killing it\n");
                posix_kill($pid, SIGKILL);
                break;
            }
            usleep(50000);
        }
        proc_close($proc);
    }

    /**
     * Runs argv (in the app's environment, $env over it), killed after
     * $timeout s; never throws for its exit status.
     *
     * @return array{0: int, 1: string, 2: string}  the exit status (-1: killed), stdout, stderr
     */
    public function exec(array $argv, array $env = [], float $timeout = 30.0): array
    {
        $out = tempnam(sys_get_temp_dir(), 'php-e2e-out');
        $err = tempnam(sys_get_temp_dir(), 'php-e2e-err');
        $env = array_filter($env + $this->appEnv(), static function ($v) {
            return $v !== null;
        });
        // In a process group of its own, to kill its children too (queue:listen runs queue:work).
        $proc = proc_open(array_merge(['setsid'], $argv), [0 => ['file', '/dev/null', 'r'], 1 => ['file', $out, 'w'], 2 => ['file', $err, 'w']], $pipes, $this->app, $env);
        if (! is_resource($proc)) {
            throw new RuntimeException('cannot run '.implode(' ', $argv));
        }
        $deadline = microtime(true) + $timeout;
        while (($st = proc_get_status($proc))['running']) {
            if (microtime(true) > $deadline) {
                posix_kill(-$st['pid'], SIGKILL);
            }
            usleep(20000);
        }
        proc_close($proc);
        $result = [$st['exitcode'], (string) file_get_contents($out), (string) file_get_contents($err)];
        unlink($out);
        unlink($err);

        return $result;
    }

    /** Runs argv to completion; its stdout, or an exception with its output. */
    public function run(array $argv, ?array $env = null, ?string $log = null): string
    {
        $out = tempnam(sys_get_temp_dir(), 'php-e2e-out');
        $err = $log ?? tempnam(sys_get_temp_dir(), 'php-e2e-err');
        $proc = proc_open($argv, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $out, 'w'], 2 => ['file', $err, 'a']], $pipes, is_dir($this->dir) ? $this->dir : null, $env);
        if (! is_resource($proc)) {
            throw new RuntimeException('cannot run '.implode(' ', $argv));
        }
        $status = proc_close($proc);
        $stdout = (string) file_get_contents($out);
        $stderr = $log === null ? (string) file_get_contents($err) : self::tail($log);
        unlink($out);
        if ($log === null) {
            unlink($err);
        }
        if ($status !== 0) {
            throw new RuntimeException(sprintf("%s exited %d:\n%s\n%s", implode(' ', array_slice($argv, 0, 4)), $status, $stdout, $stderr));
        }

        return $stdout;
    }

    public static function tail(string $file, int $lines = 30): string
    {
        $all = is_file($file) ? file($file) : [];

        return implode('', array_slice($all, -$lines));
    }

    public function shutdown(): void
    {
        $this->stop('relay');
        $this->stop('worker');
        // Leave nothing that depends on `app`: the next suite makes it afresh.
        try {
            $this->owner()->exec('DROP TABLE IF EXISTS failed_jobs, php_e2e_users');
        } catch (\Throwable $e) {
            fwrite(STDERR, 'e2e: could not drop the app\'s tables: '.$e->getMessage()."\n");
        }
    }

    // ------------------------------------------------------------------
    // Servers

    public function redis(): Redis
    {
        if ($this->redis === null) {
            $url = parse_url(self::env('TEST_REDIS_URL'));
            $this->redis = new Redis();
            $this->redis->connect($url['host'], $url['port'] ?? 6379);
            $this->redis->select((int) ltrim($url['path'] ?? '/0', '/'));
        }

        return $this->redis;
    }

    public function owner(): PDO
    {
        return $this->owner = $this->owner ?? self::pdo(self::env('TEST_PG_URL'));
    }

    /** The app's role, as the app connects. */
    public function appDb(): PDO
    {
        return $this->appDb = $this->appDb ?? self::pdo(self::env('STAGEDRAIN_APP_PG_URL'));
    }

    private static function pdo(string $url): PDO
    {
        $u = parse_url($url);
        $dsn = sprintf('pgsql:host=%s;port=%d;dbname=%s', $u['host'], $u['port'] ?? 5432, ltrim($u['path'] ?? '/postgres', '/'));

        return new PDO($dsn, isset($u['user']) ? urldecode($u['user']) : null, isset($u['pass']) ? urldecode($u['pass']) : null, [
            PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
            PDO::ATTR_DEFAULT_FETCH_MODE => PDO::FETCH_ASSOC,
        ]);
    }

    /** Empty queues, records and tables; the worker and relay keep running. */
    public function reset(): void
    {
        $this->owner()->exec('DELETE FROM staged_jobs; DELETE FROM staged_jobs_dead; DELETE FROM failed_jobs; DELETE FROM php_e2e_users');
        // The queues and records only: the relay keeps its own keys under the
        // same prefix (PREFIX.'stagedrain:*', its leader epoch), and
        // deleting them makes its next push fail and retry.
        $redis = $this->redis();
        $redis->setOption(Redis::OPT_SCAN, Redis::SCAN_RETRY);
        foreach ([self::PREFIX.'queues:*', self::PREFIX.'e2e:*'] as $pattern) {
            $it = null;
            while (($keys = $redis->scan($it, $pattern, 1000)) !== false) {
                if ($keys) {
                    $redis->del($keys);
                }
            }
        }
        if (! $this->relayRunning()) {
            $this->startRelay();
        }
    }
}
