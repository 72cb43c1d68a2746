<?php

use Illuminate\Database\Migrations\Migration;
use Stagedrain\Laravel\Schema;

/*
 * stagedrain's 007_json_payload: args and options become json, which keeps
 * the payload text json_encode wrote. Published with create_stagedrain_tables
 * by `php artisan vendor:publish --tag=stagedrain-migrations` (an app that
 * published that before gets this one, dated now). It applies the sql/ files
 * through 007_json_payload that the database has not applied yet, as
 * `stagedrain migrate` does: either may run first.
 *
 * Run it as the database's owner (the app's own role only stages jobs).
 */
return new class extends Migration
{
    public function up()
    {
        Schema::migrate($this->getConnection(), '007_json_payload');
    }

    public function down()
    {
        Schema::refuseDown();
    }
};
