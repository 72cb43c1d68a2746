<?php

// Job classes for the unit suite, written as Laravel's docs write them.

namespace Stagedrain\Laravel\Tests;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/** Protected and private properties: serialize() names them with NUL bytes. */
class SendInvoice implements ShouldQueue
{
    use InteractsWithQueue, Queueable, SerializesModels;

    public $tries = 3;
    public $backoff = [1, 5];
    public $timeout = 30;

    protected $order;
    private $note;

    public function __construct(array $order, string $note)
    {
        $this->order = $order;
        $this->note = $note;
    }

    public function note(): string
    {
        return $this->note;
    }
}

class AfterCommitJob implements ShouldQueue
{
    use Queueable;

    public function __construct()
    {
        $this->afterCommit(); // Queueable's; the framework's queues defer it to after COMMIT
    }
}

/** Holds whatever it is given, privately: the resource check must see it. */
class HoldsJob implements ShouldQueue
{
    use Queueable;

    private $held;

    public function __construct($held)
    {
        $this->held = $held;
    }
}

/** serialize() writes only what __sleep() names. */
class SleepyJob
{
    public $kept;
    protected $dropped;

    public function __construct($kept, $dropped)
    {
        $this->kept = $kept;
        $this->dropped = $dropped;
    }

    public function __sleep()
    {
        return ['kept'];
    }
}

/** A job whose state points back at itself. */
class CyclicJob
{
    public $self;
    public $list;

    public function __construct()
    {
        $this->self = $this;
        $list = ['a' => 1];
        $list['me'] = &$list;
        $this->list = $list;
    }
}
