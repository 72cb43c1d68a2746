<?php

namespace App\Jobs;

use App\Models\User;
use App\Record;
use Carbon\CarbonInterface;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * Every kind of constructor argument, kept as Laravel's docs write jobs:
 * public, protected and private properties (serialize() writes the last two
 * with NUL bytes in their names), an Eloquent model (SerializesModels stores
 * its id; the worker loads it again) and a Carbon date.
 */
class Typed implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $tag;
    public $number;
    public $list;
    public $user;
    public $when;
    protected $secret;
    private $hidden;

    public function __construct(string $tag, int $number, array $list, User $user, CarbonInterface $when, string $secret, string $hidden)
    {
        $this->tag = $tag;
        $this->number = $number;
        $this->list = $list;
        $this->user = $user;
        $this->when = $when;
        $this->secret = $secret;
        $this->hidden = $hidden;
    }

    public function handle(): void
    {
        Record::ran('typed', [
            'tag' => $this->tag,
            'number' => $this->number,
            'list' => $this->list,
            'user' => ['class' => get_class($this->user), 'exists' => $this->user->exists, 'id' => $this->user->id, 'email' => $this->user->email],
            'when' => ['class' => get_class($this->when), 'at' => $this->when->format('Y-m-d\TH:i:s.uP'), 'tz' => $this->when->getTimezone()->getName()],
            'secret' => $this->secret,
            'hidden' => $this->hidden,
        ] + Record::job($this->job));
    }
}
