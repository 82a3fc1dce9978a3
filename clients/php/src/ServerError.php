<?php

declare(strict_types=1);

namespace Pont;

/** 5xx after the retries, or an answer that is not JSON. */
class ServerError extends PontError
{
}
