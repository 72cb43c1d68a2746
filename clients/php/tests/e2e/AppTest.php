<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * The app as the README installs it: composer install from a path
 * repository, the provider found by Laravel's package discovery; and the
 * README's second form, a hand-written Class@method row, under the real worker.
 */
final class AppTest extends E2ETestCase
{
    public function test_composer_installs_the_package_and_discovery_registers_the_driver(): void
    {
        $installed = json_decode((string) file_get_contents($this->e2e->app.'/vendor/composer/installed.json'), true);
        $names = array_column($installed['packages'] ?? $installed, 'name');
        $this->assertSame(['stagedrain/laravel'], $names, 'only the package is installed; Debian provides Laravel');
        $this->assertFileExists($this->e2e->app.'/vendor/stagedrain/laravel/src/StagedQueue.php');

        $got = $this->scenario('discovered');
        $this->assertSame('8.83.26', $got['laravel']);
        $this->assertSame('staged', $got['default']);
        $this->assertSame('Stagedrain\Laravel\StagedQueue', $got['connection_class']);
        $this->assertSame(
            realpath($this->e2e->app.'/vendor/stagedrain/laravel/src/StagedQueue.php'),
            $got['connection_file'],
            'the installed copy is the one loaded'
        );
        $provider = 'Stagedrain\Laravel\StagedrainServiceProvider';
        $this->assertNotContains($provider, $got['configured_providers'], 'config/app.php does not list it');
        $this->assertSame([$provider], $got['manifest_providers'], 'discovered from vendor/composer/installed.json');
        $this->assertContains($provider, $got['loaded_providers']);
        $manifest = require $this->e2e->app.'/bootstrap/cache/packages.php';
        $this->assertSame(['stagedrain/laravel' => ['providers' => [$provider]]], $manifest);
    }

    public function test_a_hand_written_class_at_method_row_runs_under_the_real_worker(): void
    {
        $insert = $this->e2e->appDb()->prepare(
            'INSERT INTO staged_jobs (queue, job_class, args) VALUES (?, ?, CAST(? AS json))'
        );
        $data = [['tag' => $this->tag.'-1', 'zeta' => 1, 'alpha' => ['b' => 1.0e20, 'a' => -0.0], 'list' => ['a', 'é', null, 2.5, "nul\0here"]]];
        $args = json_encode($data, JSON_PRESERVE_ZERO_FRACTION);
        $this->assertStringContainsString('"alpha":{"b":1.0e+20,"a":-0.0}', $args);
        $this->assertStringContainsString('"nul\\u0000here"', $args);
        $insert->execute(['default', 'App\Jobs\Recorder@handle', $args]);
        $insert->execute(['x', 'App\Jobs\Recorder@handle', json_encode([['tag' => $this->tag.'-2'], 'second'])]);

        $ran = $this->waitRan([$this->tag.'-1', $this->tag.'-2']);
        $one = $ran[$this->tag.'-1'];
        $this->assertSame('recorder', $one['kind']);
        // The json column keeps the text as written: keys in their order, 1.0e+20 and -0.0 floats, the NUL.
        $this->assertSame($data, $one['data'], 'the row\'s args are the job\'s data');
        $this->assertSame(['tag', 'zeta', 'alpha', 'list'], array_keys($one['data'][0]));
        $this->assertSame(['b', 'a'], array_keys($one['data'][0]['alpha']));
        $this->assertSame('-0.0', var_export($one['data'][0]['alpha']['a'], true));
        $this->assertSame('App\Jobs\Recorder@handle', $one['payload_job']);
        $this->assertSame('App\Jobs\Recorder', $one['display_name']);
        $this->assertSame('default', $one['queue']);
        $this->assertSame('redis', $one['connection']);
        $this->assertSame(1, $one['attempts']);
        $this->assertMatchesRegularExpression('/^[0-9a-f-]{36}$/', $one['uuid']);
        $this->assertSame([['tag' => $this->tag.'-2'], 'second'], $ran[$this->tag.'-2']['data']);
        $this->assertSame('x', $ran[$this->tag.'-2']['queue']);
    }
}
