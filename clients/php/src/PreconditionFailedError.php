<?php

declare(strict_types=1);

namespace Pont;

/** 412: an If-Match that no longer holds, or a conditional write matching more than one resource. */
class PreconditionFailedError extends PontError
{
}
