<?php

declare(strict_types=1);

namespace Pont;

/** 401: invalid or expired token or credentials (also at construction). */
class AuthenticationError extends ServiceException
{
}
