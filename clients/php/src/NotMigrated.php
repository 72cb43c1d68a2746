<?php

namespace Stagedrain\Laravel;

use RuntimeException;

/**
 * The staged_jobs table (or a column the package writes) is missing: the
 * database was not migrated with `stagedrain migrate`. The database's own
 * error is the previous exception.
 */
class NotMigrated extends RuntimeException
{
}
