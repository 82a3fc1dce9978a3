<?php

declare(strict_types=1);

namespace Pont;

/** 413: the body or the batch is over the server's limit (split it). */
class PayloadTooLargeError extends PontError
{
}
