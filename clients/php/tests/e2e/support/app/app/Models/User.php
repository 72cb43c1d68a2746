<?php

namespace App\Models;

use Illuminate\Database\Eloquent\Model;

class User extends Model
{
    protected $table = 'php_e2e_users';
    public $timestamps = false;
    protected $guarded = [];
}
