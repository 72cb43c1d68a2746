<?php

namespace Stagedrain\Laravel;

use Illuminate\Queue\InvalidPayloadException;

/**
 * A job that cannot be staged: raised by push()/dispatch() before any row is
 * written, so the caller's transaction is still usable.
 *
 * It is an InvalidPayloadException because that is what Laravel raises for a
 * payload it cannot build; code that already catches that catches this too.
 */
class NotStageable extends InvalidPayloadException
{
}
