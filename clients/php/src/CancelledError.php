<?php

declare(strict_types=1);

namespace Pont;

/**
 * The caller cancelled the call (its 'cancel' callable answered true): no attempt starts after that, the wait between
 * attempts ends, and the transfer in flight is aborted. If a request had been sent, it may have taken effect. Not a
 * NetworkError: nothing failed, and code that retries or alerts on network errors should leave it alone.
 */
class CancelledError extends PontError
{
}
