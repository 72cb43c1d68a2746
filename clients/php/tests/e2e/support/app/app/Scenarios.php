<?php

namespace App;

use App\Jobs\Flaky;
use App\Jobs\Mark;
use App\Jobs\Typed;
use App\Jobs\WithClosure;
use App\Jobs\WithResource;
use App\Models\User;
use Illuminate\Support\Carbon;
use Illuminate\Support\Facades\Bus;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Queue;
use RuntimeException;
use Throwable;

/**
 * What the app does, as an app would: dispatch inside DB::transaction on the
 * default queue connection (QUEUE_CONNECTION=staged). Each method returns
 * what the test checks against what the worker recorded.
 */
class Scenarios
{
    /** The queue connection the app got, and where its classes came from. */
    public function discovered(array $in): array
    {
        $queue = Queue::connection();
        $app = app();

        return [
            'default' => config('queue.default'),
            'connection_class' => get_class($queue),
            'connection_file' => (new \ReflectionClass($queue))->getFileName(),
            'configured_providers' => config('app.providers'),
            'loaded_providers' => array_keys($app->getLoadedProviders()),
            'manifest_providers' => $app->make(\Illuminate\Foundation\PackageManifest::class)->providers(),
            'laravel' => $app->version(),
        ];
    }

    /** Committed: three ways to dispatch, every kind of argument. */
    public function commit(array $in): array
    {
        $tag = $in['tag'];
        $list = $in['list'];

        return DB::transaction(function () use ($tag, $list) {
            $user = User::create(['email' => "{$tag}@example.test"]);
            $when = Carbon::parse('2024-02-29 13:14:15.123456', 'Europe/Paris');
            Typed::dispatch("{$tag}-1", 1, $list, $user, $when, "secret-1", "hidden\0-1");
            dispatch(new Typed("{$tag}-2", 2, $list, $user, $when, "secret-2", "hidden\0-2"));
            $id = Queue::push(new Typed("{$tag}-3", 3, $list, $user, $when, "secret-3", "hidden\0-3"));

            return ['user_id' => $user->id, 'pushed_id' => $id];
        });
    }

    /** Rolled back: a transaction, an explicit rollBack and savepoints. */
    public function rollback(array $in): array
    {
        $tag = $in['tag'];
        try {
            DB::transaction(function () use ($tag) {
                Mark::dispatch("{$tag}-gone-1");
                throw new RuntimeException('roll back');
            });
        } catch (RuntimeException $e) {
        }

        DB::beginTransaction();
        Mark::dispatch("{$tag}-gone-2");
        Queue::push('App\Jobs\Legacy@handle', ['tag' => "{$tag}-gone-3"]);
        DB::rollBack();

        DB::transaction(function () use ($tag) {
            Mark::dispatch("{$tag}-kept-1");
            try {
                DB::transaction(function () use ($tag) {
                    Mark::dispatch("{$tag}-gone-4");
                    dispatch(function () use ($tag) {
                        Record::ran('closure', ['tag' => "{$tag}-gone-5"]);
                    });
                    throw new RuntimeException('roll back to the savepoint');
                });
            } catch (RuntimeException $e) {
            }
            DB::transaction(function () use ($tag) {
                Mark::dispatch("{$tag}-kept-2");
            });
            Mark::dispatch("{$tag}-kept-3");
        });

        return ['levels_after' => DB::transactionLevel()];
    }

    /** n jobs in one transaction, Mark(tag, 0..n-1), on one queue. */
    public function many(array $in): array
    {
        $n = $in['n'];
        DB::transaction(function () use ($in, $n) {
            for ($i = 0; $i < $n; $i++) {
                Mark::dispatch($in['tag'], $i)->onQueue($in['queue'] ?? null);
            }
        });

        return ['n' => $n];
    }

    public function delayed(array $in): array
    {
        $tag = $in['tag'];
        $before = microtime(true);
        DB::transaction(function () use ($tag, $in) {
            Mark::dispatch("{$tag}-delay", 'delay')->delay($in['seconds']);
            Mark::dispatch("{$tag}-now", 'now');
        });

        return ['before' => $before];
    }

    public function later(array $in): array
    {
        $tag = $in['tag'];
        $before = microtime(true);
        $ids = DB::transaction(function () use ($tag, $in) {
            return [
                Queue::later($in['seconds'], new Mark("{$tag}-later", 'object')),
                Queue::later(now()->addSeconds($in['seconds']), 'App\Jobs\Legacy@handle', ['tag' => "{$tag}-later-string"]),
            ];
        });

        return ['before' => $before, 'ids' => $ids];
    }

    public function onQueue(array $in): array
    {
        $tag = $in['tag'];
        $id = DB::transaction(function () use ($tag) {
            Mark::dispatch("{$tag}-1")->onQueue('x');
            dispatch(new Mark("{$tag}-2"))->onQueue('x');

            return Queue::pushOn('x', new Mark("{$tag}-3"));
        });

        return ['pushed_id' => $id];
    }

    public function chain(array $in): array
    {
        $tag = $in['tag'];
        DB::transaction(function () use ($tag) {
            Bus::chain([new Mark($tag, 1), new Mark($tag, 2), new Mark($tag, 3)])->dispatch();
        });

        return [];
    }

    public function strings(array $in): array
    {
        $tag = $in['tag'];
        $id = DB::transaction(function () use ($tag) {
            return Queue::push('App\Jobs\Legacy@handle', ['tag' => $tag, 'list' => [1, 'two', ['three' => 3.5]]]);
        });

        return ['pushed_id' => $id];
    }

    public function closure(array $in): array
    {
        $tag = $in['tag'];
        $word = "captured \u{e9}";
        DB::transaction(function () use ($tag, $word) {
            dispatch(function () use ($tag, $word) {
                Record::ran('closure', ['tag' => $tag, 'word' => $word]);
            });
        });

        return [];
    }

    /** One failing job staged, one pushed by Laravel's own Redis driver. */
    public function flaky(array $in): array
    {
        $tag = $in['tag'];
        DB::transaction(function () use ($tag) {
            Flaky::dispatch("{$tag}-staged");
        });
        Flaky::dispatch("{$tag}-redis")->onConnection('redis');

        return [];
    }

    /** Jobs that cannot be staged raise at dispatch; the transaction goes on. */
    public function unstageable(array $in): array
    {
        $tag = $in['tag'];
        $caught = [];
        $try = function (string $what, callable $f) use (&$caught) {
            try {
                $f();
                $caught[$what] = null;
            } catch (Throwable $e) {
                $caught[$what] = ['class' => get_class($e), 'parents' => array_values(class_parents($e)), 'message' => $e->getMessage()];
            }
        };
        DB::transaction(function () use ($tag, $try) {
            Mark::dispatch("{$tag}-before");
            $try('closure', function () {
                dispatch(new WithClosure(function () {
                    return 1;
                }));
            });
            $try('resource', function () use ($tag) {
                WithResource::dispatch("{$tag}-resource");
            });
            $try('raw', function () {
                Queue::pushRaw('{"job":"App\\\\Jobs\\\\Legacy@handle","data":[]}');
            });
            DB::select('SELECT 1');
            Mark::dispatch("{$tag}-after");
        });
        // Outside a transaction as well.
        $try('resource-autocommit', function () use ($tag) {
            WithResource::dispatch("{$tag}-resource-autocommit");
        });

        return ['caught' => $caught, 'level' => DB::transactionLevel()];
    }
}
