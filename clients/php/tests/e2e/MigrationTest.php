<?php

declare(strict_types=1);

namespace Stagedrain\Laravel\Tests\E2E;

require_once __DIR__.'/support/E2ETestCase.php';

/**
 * The published migration, run by the real `php artisan migrate` on fresh
 * databases as their owner: it makes the tables `stagedrain migrate` makes,
 * and neither applies a file twice, whichever runs first. A rollback is
 * refused. The SQL it reads is the repository's, through the package's
 * symlink in the composer path install.
 */
final class MigrationTest extends E2ETestCase
{
    private const DATABASES = ['php_e2e_migrate_a', 'php_e2e_migrate_b'];

    protected function setUp(): void
    {
        parent::setUp();
        foreach (self::DATABASES as $db) {
            $this->e2e->owner()->exec("DROP DATABASE IF EXISTS {$db} WITH (FORCE)");
            $this->e2e->owner()->exec("CREATE DATABASE {$db}");
        }
    }

    protected function tearDown(): void
    {
        foreach (self::DATABASES as $db) {
            $this->e2e->owner()->exec("DROP DATABASE IF EXISTS {$db} WITH (FORCE)");
        }
        parent::tearDown();
    }

    /** The owner's (the harness superuser's) URL of database $db. */
    private static function url(string $db): string
    {
        return preg_replace('#/[^/?]*(\?|$)#', "/{$db}\$1", E2E::env('TEST_PG_URL'), 1);
    }

    /** As a deploy runs it: the owner's URL in the app's environment. */
    private function artisanMigrate(string $db, string $command = 'migrate'): array
    {
        return $this->e2e->exec(['php', 'artisan', $command, '--force'], ['DATABASE_URL' => self::url($db)], 60.0);
    }

    private function stagedrainMigrate(string $db): void
    {
        $this->e2e->run([E2E::env('STAGEDRAIN_BIN'), 'migrate', '--pg-url', self::url($db), '--log-level', 'warn']);
    }

    /** stagedrain_migrations: name => applied_at. */
    private function applied(string $db): array
    {
        $pdo = new \PDO(...self::pdoArgs($db));

        return $pdo->query('SELECT name, applied_at::text FROM stagedrain_migrations ORDER BY name')->fetchAll(\PDO::FETCH_KEY_PAIR);
    }

    private function laravelMigrations(string $db): array
    {
        $pdo = new \PDO(...self::pdoArgs($db));

        return $pdo->query('SELECT migration FROM migrations ORDER BY id')->fetchAll(\PDO::FETCH_COLUMN);
    }

    private static function pdoArgs(string $db): array
    {
        $u = parse_url(self::url($db));

        return [sprintf('pgsql:host=%s;port=%d;dbname=%s', $u['host'], $u['port'] ?? 5432, $db), urldecode($u['user'] ?? ''), null, [\PDO::ATTR_ERRMODE => \PDO::ERRMODE_EXCEPTION]];
    }

    private const ALL = ['001_staged_jobs', '002_cursor', '003_dead_letter_key', '004_job_uuid', '005_tenants_and_held', '006_routes', '007_json_payload', '008_leader'];

    /** The package's migrations, each published once: their names, in the order they run. */
    private function publish(): array
    {
        [$status, $out, $err] = $this->e2e->exec(['php', 'artisan', 'vendor:publish', '--tag=stagedrain-migrations']);
        $this->assertSame(0, $status, $out.$err);
        $names = [];
        foreach (['create_stagedrain_tables', 'update_stagedrain_tables_to_007_json_payload', 'update_stagedrain_tables_to_008_leader'] as $name) {
            $published = glob($this->e2e->app."/database/migrations/*_{$name}.php");
            $this->assertCount(1, $published, 'published once, however often published');
            $this->assertMatchesRegularExpression('#/\d{4}_\d{2}_\d{2}_\d{6}_'.$name.'\.php$#', $published[0]);
            $this->assertFileEquals(E2E::clientDir()."/database/migrations/{$name}.php", $published[0]);
            $names[] = basename($published[0], '.php');
        }
        $sorted = $names;
        sort($sorted, SORT_STRING);
        $this->assertSame($sorted, $names, 'create_ runs before update_');

        return $names;
    }

    private function columnTypes(string $db): array
    {
        $pdo = new \PDO(...self::pdoArgs($db));

        return $pdo->query("SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
            ." WHERE column_name IN ('args', 'options') AND table_name LIKE 'staged_jobs%' ORDER BY 1")->fetchAll(\PDO::FETCH_KEY_PAIR);
    }

    /** The name migration $name is published under, its date first. */
    private function published(string $name): string
    {
        return basename(glob($this->e2e->app."/database/migrations/*_{$name}.php")[0], '.php');
    }

    private function hasTable(string $db, string $table): bool
    {
        $pdo = new \PDO(...self::pdoArgs($db));
        $found = $pdo->prepare('SELECT to_regclass(?) IS NOT NULL');
        $found->execute([$table]);

        return (bool) $found->fetchColumn();
    }

    public function test_the_package_reads_the_repositorys_sql_through_the_path_install(): void
    {
        $package = $this->e2e->app.'/vendor/stagedrain/laravel';
        $this->assertTrue(is_link($package), 'composer symlinked the path repository');
        $repo = realpath(E2E::clientDir().'/../../sql');
        $this->assertSame($repo, realpath($package.'/sql'));
        $this->assertFileEquals($repo.'/008_leader.sql', $package.'/sql/008_leader.sql');
    }

    public function test_artisan_migrate_then_stagedrain_migrate_applies_each_file_once(): void
    {
        $migrations = $this->publish();
        $this->assertSame($migrations, $this->publish(), 'publishing again keeps the first');

        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[0]);
        $this->assertSame(0, $status, $out.$err);
        $applied = $this->applied(self::DATABASES[0]);
        $this->assertSame(self::ALL, array_keys($applied));
        $this->assertSame($migrations, $this->laravelMigrations(self::DATABASES[0]));

        $this->stagedrainMigrate(self::DATABASES[0]);
        $this->assertSame($applied, $this->applied(self::DATABASES[0]), 'stagedrain migrate applied nothing again');
        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[0]);
        $this->assertSame(0, $status, $out.$err);
        $this->assertStringContainsString('Nothing to migrate', $out);

        // Irreversible: the rollback fails and the tables stay.
        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[0], 'migrate:rollback');
        $this->assertNotSame(0, $status);
        $this->assertStringContainsString('the stagedrain migration is irreversible', $out.$err);
        $this->assertSame($applied, $this->applied(self::DATABASES[0]));
        $this->assertSame($migrations, $this->laravelMigrations(self::DATABASES[0]));
    }

    public function test_stagedrain_migrate_then_artisan_migrate_applies_nothing_again(): void
    {
        $migrations = $this->publish();
        $this->stagedrainMigrate(self::DATABASES[1]);
        $applied = $this->applied(self::DATABASES[1]);
        $this->assertSame(self::ALL, array_keys($applied));

        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[1]);
        $this->assertSame(0, $status, $out.$err);
        $this->assertSame($applied, $this->applied(self::DATABASES[1]), 'artisan migrate applied nothing again');
        $this->assertSame($migrations, $this->laravelMigrations(self::DATABASES[1]));
    }

    /**
     * An app that published and ran the package's first migration (through
     * 006, jsonb columns) before the package had 007: publishing again adds
     * the update migrations alone, and `migrate` runs them in order.
     */
    public function test_an_app_migrated_through_006_gets_json_columns_from_the_update_migration(): void
    {
        [$create, $to007, $to008] = $this->publish();
        unlink($this->e2e->app."/database/migrations/{$to007}.php");
        unlink($this->e2e->app."/database/migrations/{$to008}.php");
        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[1]);
        $this->assertSame(0, $status, $out.$err);
        $this->assertSame(array_slice(self::ALL, 0, 6), array_keys($this->applied(self::DATABASES[1])));
        $this->assertSame(['jsonb'], array_values(array_unique($this->columnTypes(self::DATABASES[1]))));

        sleep(1); // the updates are dated after the create, as a later publish would be
        $this->assertSame($create, $this->publish()[0], 'the create migration stays where it was');
        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[1]);
        $this->assertSame(0, $status, $out.$err);
        $this->assertSame(self::ALL, array_keys($this->applied(self::DATABASES[1])));
        $this->assertCount(6, $this->columnTypes(self::DATABASES[1]));
        $this->assertSame(['json'], array_values(array_unique($this->columnTypes(self::DATABASES[1]))));
        $this->assertTrue($this->hasTable(self::DATABASES[1], 'staged_jobs_leader'));
        $this->assertSame([$create, $this->published('update_stagedrain_tables_to_007_json_payload'), $this->published('update_stagedrain_tables_to_008_leader')],
            $this->laravelMigrations(self::DATABASES[1]));
    }

    /**
     * An app that published and ran the package's migrations through 007
     * before the package had 008: publishing again adds 008's update
     * migration alone, and `migrate` makes staged_jobs_leader.
     */
    public function test_an_app_migrated_through_007_gets_the_leader_table_from_the_update_migration(): void
    {
        [$create, $to007, $to008] = $this->publish();
        unlink($this->e2e->app."/database/migrations/{$to008}.php");
        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[1]);
        $this->assertSame(0, $status, $out.$err);
        $this->assertSame(array_slice(self::ALL, 0, 7), array_keys($this->applied(self::DATABASES[1])));
        $this->assertFalse($this->hasTable(self::DATABASES[1], 'staged_jobs_leader'));

        sleep(1); // the update is dated after the others, as a later publish would be
        $this->assertSame([$create, $to007], array_slice($this->publish(), 0, 2), 'the earlier migrations stay where they were');
        [$status, $out, $err] = $this->artisanMigrate(self::DATABASES[1]);
        $this->assertSame(0, $status, $out.$err);
        $this->assertSame(self::ALL, array_keys($this->applied(self::DATABASES[1])));
        $this->assertTrue($this->hasTable(self::DATABASES[1], 'staged_jobs_leader'));
        $this->assertNotSame($to008, $this->published('update_stagedrain_tables_to_008_leader'), 'published anew, dated now');
        $this->assertSame([$create, $to007, $this->published('update_stagedrain_tables_to_008_leader')],
            $this->laravelMigrations(self::DATABASES[1]));
    }

    /** The app's role may not create tables: the owner runs migrations. */
    public function test_the_app_role_cannot_run_it(): void
    {
        $this->publish();
        $app = preg_replace('#^(postgres(?:ql)?://)[^@/]*@#', '$1app@', self::url(self::DATABASES[1]));
        [$status, $out, $err] = $this->e2e->exec(['php', 'artisan', 'migrate', '--force'], ['DATABASE_URL' => $app], 60.0);
        $this->assertNotSame(0, $status);
        $this->assertStringContainsString('permission denied', $out.$err);
    }
}
