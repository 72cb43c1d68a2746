<?php

use Illuminate\Database\Migrations\Migration;
use Stagedrain\Laravel\Schema;

/*
 * stagedrain's 008_leader: the table staged_jobs_leader, where each leading
 * relay records a digest of its targets and rules, so that one leading after
 * a crash across a route change pushes no row twice (a relay finding no such
 * table warns that a route change across a crash goes unseen). Published with
 * the others by `php artisan vendor:publish --tag=stagedrain-migrations` (an
 * app that published them before gets this one, dated now). It applies the
 * sql/ files through 008_leader that the database has not applied yet, as
 * `stagedrain migrate` does: either may run first.
 *
 * Run it as the database's owner (the app's own role only stages jobs).
 */
return new class extends Migration
{
    public function up()
    {
        Schema::migrate($this->getConnection(), '008_leader');
    }

    public function down()
    {
        Schema::refuseDown();
    }
};
