<?php

declare(strict_types=1);

namespace Pont;

/** No answer: the connection failed or was lost. After a lost answer the request may have taken effect. */
class NetworkError extends PontError
{
}
