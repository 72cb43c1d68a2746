<?php

namespace Stagedrain\Laravel\Tests;

use Illuminate\Database\MySqlConnection;
use InvalidArgumentException;
use LogicException;
use RuntimeException;
use Stagedrain\Laravel\Schema;

require_once __DIR__.'/TestCase.php';

/**
 * Schema::migrate on SQL files of the test's own, in a schema of the test's
 * own (php_schema, on the search path), as the superuser; and the package's
 * sql/, which is the repository's.
 */
class SchemaTest extends TestCase
{
    /** @var string */
    private $dir;

    protected function setUp(): void
    {
        parent::setUp();
        $this->admin()->unprepared('DROP SCHEMA IF EXISTS php_schema CASCADE; CREATE SCHEMA php_schema');
        $this->db->addConnection(['url' => self::env('TEST_PG_URL'), 'schema' => 'php_schema'], 'schema');
        $this->dir = sys_get_temp_dir().'/stagedrain-schema-'.bin2hex(random_bytes(4));
        mkdir($this->dir);
        $this->write([
            '001_one.sql' => 'CREATE TABLE one (id int); INSERT INTO one VALUES (1);',
            '002_two.sql' => "CREATE TABLE two (id int);\nDO \$\$ BEGIN INSERT INTO one VALUES (2); END \$\$;",
            '003_three.sql' => 'ALTER TABLE two ADD COLUMN name text;',
            // Not migrations: what sql/ holds besides them.
            'roles.sql' => 'SELECT 1/0;',
            'notify.sql' => 'SELECT 1/0;',
            'embed.sh' => 'exit 1',
            '04_short.sql' => 'SELECT 1/0;',
        ]);
    }

    protected function tearDown(): void
    {
        array_map('unlink', glob($this->dir.'/*'));
        rmdir($this->dir);
        $this->admin()->unprepared('DROP SCHEMA IF EXISTS php_schema CASCADE');
        parent::tearDown();
    }

    private function write(array $files): void
    {
        foreach ($files as $name => $sql) {
            file_put_contents($this->dir.'/'.$name, $sql);
        }
    }

    private function schema(): \Illuminate\Database\Connection
    {
        return $this->db->getConnection('schema');
    }

    private function applied(): array
    {
        return array_column($this->schema()->select('SELECT name FROM stagedrain_migrations ORDER BY name'), 'name');
    }

    public function testAppliesInOrderThroughTheNamedOneAndNothingTwice(): void
    {
        $this->assertSame(['001_one', '002_two'], Schema::migrate($this->schema(), '002_two', $this->dir));
        $this->assertSame(['001_one', '002_two'], $this->applied());
        $this->assertSame([1, 2], array_map('intval', array_column($this->schema()->select('SELECT id FROM one ORDER BY id'), 'id')));
        $this->assertSame([], Schema::migrate($this->schema(), '002_two', $this->dir));
        $this->assertSame(['003_three'], Schema::migrate($this->schema(), '003_three', $this->dir));
        $this->assertSame(['001_one', '002_two', '003_three'], $this->applied());
        $this->assertSame(2, (int) $this->schema()->selectOne('SELECT count(*) AS n FROM one')->n, 'no file ran twice');
    }

    /** `stagedrain migrate` recorded some: only the rest run. */
    public function testSkipsWhatIsRecordedAlready(): void
    {
        $this->schema()->unprepared('CREATE TABLE stagedrain_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());'
            ."CREATE TABLE one (id int); INSERT INTO stagedrain_migrations (name) VALUES ('001_one')");
        $this->assertSame(['002_two'], Schema::migrate($this->schema(), '002_two', $this->dir));
        $this->assertSame([2], array_map('intval', array_column($this->schema()->select('SELECT id FROM one'), 'id')));
    }

    public function testAFailingFileAppliesNothing(): void
    {
        $this->write(['003_three.sql' => 'ALTER TABLE nowhere ADD COLUMN x int;']);
        try {
            Schema::migrate($this->schema(), '003_three', $this->dir);
            $this->fail('no exception');
        } catch (\Illuminate\Database\QueryException $e) {
            $this->assertStringContainsString('nowhere', $e->getMessage());
        }
        $this->assertNull($this->schema()->selectOne("SELECT to_regclass('stagedrain_migrations') AS t")->t);
        $this->assertNull($this->schema()->selectOne("SELECT to_regclass('one') AS t")->t);
    }

    /** Laravel's migrator wraps up() in a transaction: a savepoint inside it, undone with it. */
    public function testRunsInsideTheCallersTransaction(): void
    {
        $db = $this->schema();
        $db->beginTransaction();
        Schema::migrate($db, '001_one', $this->dir);
        $this->assertSame(1, $db->transactionLevel());
        $db->rollBack();
        $this->assertNull($db->selectOne("SELECT to_regclass('one') AS t")->t);
    }

    public function testAnUnknownNameIsRefusedWithTheNames(): void
    {
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('no stagedrain migration "004_four" (these are: 001_one, 002_two, 003_three)');
        Schema::migrate($this->schema(), '004_four', $this->dir);
    }

    public function testAMissingDirectorySaysHowToInstall(): void
    {
        $this->expectException(RuntimeException::class);
        $this->expectExceptionMessage('install the package from a checkout through a composer path repository');
        Schema::migrate($this->schema(), '001_one', $this->dir.'/nowhere');
    }

    public function testOnlyPostgres(): void
    {
        $mysql = new MySqlConnection(function () {
            return null;
        }, 'app', '', ['name' => 'mysql', 'driver' => 'mysql']);
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('the stagedrain tables are Postgres tables; database connection "mysql" is mysql');
        Schema::migrate($mysql, '001_one', $this->dir);
    }

    public function testDownIsRefused(): void
    {
        $this->expectException(LogicException::class);
        $this->expectExceptionMessage('the stagedrain migration is irreversible');
        Schema::refuseDown();
    }

    /** The package's sql/ is the repository's, through its relative symlink. */
    public function testThePackagesSqlIsTheRepositorys(): void
    {
        $repo = realpath(__DIR__.'/../../../../sql');
        $this->assertSame('../../sql', readlink(__DIR__.'/../../sql'));
        $this->assertSame($repo, realpath(Schema::dir()));
        $expected = array_map(static function ($f) {
            return basename($f, '.sql');
        }, glob($repo.'/[0-9][0-9][0-9]_*.sql'));
        $this->assertSame($expected, array_keys(Schema::files()));
        $this->assertContains('008_leader', $expected);
    }

    /** The real files, in a schema of their own: the tables `stagedrain migrate` makes. */
    public function testTheRealFilesMakeTheTables(): void
    {
        $this->assertSame(array_keys(Schema::files()), Schema::migrate($this->schema(), '008_leader'));
        foreach (['staged_jobs', 'staged_jobs_dead', 'staged_jobs_held', 'staged_jobs_leader'] as $table) {
            $this->assertNotNull($this->schema()->selectOne('SELECT to_regclass(?) AS t', ["php_schema.$table"])->t, $table);
        }
        $this->assertSame([], Schema::migrate($this->schema(), '008_leader'));
    }
}
