<?php

declare(strict_types=1);

namespace Pont;

/** No answer within the call's timeout or overall deadline; the request may have taken effect. */
class TimeoutError extends NetworkError
{
}
