<?php

declare(strict_types=1);

namespace Pont;

/** 409: the request conflicts with the current state (a reused batch id, a resource still referred to). */
class ConflictError extends PontError
{
}
