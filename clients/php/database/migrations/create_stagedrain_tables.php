<?php

use Illuminate\Database\Migrations\Migration;
use Stagedrain\Laravel\Schema;

/*
 * The stagedrain tables (staged_jobs, and the relay's), published by
 * `php artisan vendor:publish --tag=stagedrain-migrations`. It applies the
 * stagedrain repository's sql/ files through 006_routes that the database has
 * not applied yet, as `stagedrain migrate` does: either may run first. A later
 * stagedrain schema comes as one more migration naming its last file, as
 * update_stagedrain_tables_to_007_json_payload.php and
 * update_stagedrain_tables_to_008_leader.php do.
 *
 * Run it as the database's owner (the app's own role only stages jobs).
 */
return new class extends Migration
{
    public function up()
    {
        Schema::migrate($this->getConnection(), '006_routes');
    }

    public function down()
    {
        Schema::refuseDown();
    }
};
