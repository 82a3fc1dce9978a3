<?php

declare(strict_types=1);

namespace Pont;

/** 403: the token lacks a scope. */
class AuthorizationError extends PontError
{
}
