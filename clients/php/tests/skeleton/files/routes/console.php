<?php

use Illuminate\Support\Facades\Artisan;
