<?php

namespace Stagedrain\Laravel;

use Illuminate\Container\Container;
use Illuminate\Database\ConnectionInterface;
use InvalidArgumentException;
use LogicException;
use RuntimeException;

/**
 * The stagedrain tables through a Laravel migration: the repository's
 * sql/NNN_name.sql files (this package's sql/ is a symlink to them), applied
 * as `stagedrain migrate` applies them, so either may run first and neither
 * applies a file twice.
 */
final class Schema
{
    /** Only these are schema migrations (not roles.sql, notify.sql, embed.sh). */
    private const FILE = '/\A([0-9]{3}_[a-z0-9_]+)\.sql\z/';

    /**
     * Applies every stagedrain migration up to and including $through (e.g.
     * "007_json_payload") that the database has not recorded in
     * stagedrain_migrations, in one transaction (a savepoint inside the
     * migrator's own), serialized with `stagedrain migrate` by its advisory lock.
     *
     * @param  \Illuminate\Database\ConnectionInterface|string|null  $connection  a connection or its name (null: the default one)
     * @return string[]  the names applied now
     */
    public static function migrate($connection, string $through, ?string $dir = null): array
    {
        $db = $connection instanceof ConnectionInterface
            ? $connection
            : Container::getInstance()->make('db')->connection($connection);
        if ($db->getDriverName() !== 'pgsql') {
            throw new InvalidArgumentException(sprintf(
                'the stagedrain tables are Postgres tables; database connection "%s" is %s',
                $db->getName(), $db->getDriverName()
            ));
        }
        $files = self::upTo(self::files($dir), $through);

        return $db->transaction(function () use ($db, $files) {
            // The statements of relay/migrate.c, in its order.
            $db->select("SELECT pg_advisory_xact_lock(hashtext('stagedrain migrate'))");
            $db->statement('CREATE TABLE IF NOT EXISTS stagedrain_migrations ('
                .'name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
            $applied = [];
            foreach ($files as $name => $path) {
                if ($db->select('SELECT 1 FROM stagedrain_migrations WHERE name = ?', [$name])) {
                    continue;
                }
                $db->unprepared(self::read($path));
                $db->insert('INSERT INTO stagedrain_migrations (name) VALUES (?)', [$name]);
                $applied[] = $name;
            }

            return $applied;
        });
    }

    /** A framework migration's down(): dropping the tables would lose the jobs in them. */
    public static function refuseDown(): void
    {
        throw new LogicException(
            'the stagedrain migration is irreversible: dropping staged_jobs loses the jobs waiting in it '
            .'(drop the tables by hand if you mean it)'
        );
    }

    /**
     * The migrations in name order, name => path.
     *
     * @return array<string, string>
     */
    public static function files(?string $dir = null): array
    {
        $dir = $dir ?? self::dir();
        $names = is_dir($dir) ? scandir($dir) : false;
        if ($names === false) {
            throw new RuntimeException(sprintf(
                'stagedrain: no SQL migrations at %s: the package\'s sql/ is a symlink to the stagedrain '
                .'repository\'s sql/ directory; install the package from a checkout through a composer '
                .'path repository (which symlinks it), not a copy of clients/php alone',
                $dir
            ));
        }
        $files = [];
        foreach ($names as $file) {
            if (preg_match(self::FILE, $file, $m)) {
                $files[$m[1]] = $dir.'/'.$file;
            }
        }
        ksort($files, SORT_STRING);

        return $files;
    }

    /** This package's sql/ (a relative symlink to the repository's). */
    public static function dir(): string
    {
        return dirname(__DIR__).'/sql';
    }

    /** @return array<string, string> */
    private static function upTo(array $files, string $through): array
    {
        if (! isset($files[$through])) {
            throw new InvalidArgumentException(sprintf(
                'no stagedrain migration "%s" (these are: %s): update the stagedrain checkout this package links to',
                $through, implode(', ', array_keys($files)) ?: 'none'
            ));
        }
        $upTo = [];
        foreach ($files as $name => $path) {
            $upTo[$name] = $path;
            if ($name === $through) {
                break;
            }
        }

        return $upTo;
    }

    private static function read(string $path): string
    {
        $sql = file_get_contents($path);
        if ($sql === false) {
            throw new RuntimeException("stagedrain: cannot read {$path}");
        }

        return $sql;
    }
}
