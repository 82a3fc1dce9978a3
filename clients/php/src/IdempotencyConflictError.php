<?php

declare(strict_types=1);

namespace Pont;

/** 409 IDEMPOTENCY_CONFLICT: an Idempotency-Key reused with another payload. */
class IdempotencyConflictError extends ConflictError
{
}
