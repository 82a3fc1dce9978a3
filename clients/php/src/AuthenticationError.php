<?php

declare(strict_types=1);

namespace Pont;

/** 401: invalid or expired token or credentials. */
class AuthenticationError extends PontError
{
}
