<?php

declare(strict_types=1);

namespace Pont;

/** 400 and 422: the request failed validation (body['details'] lists every problem); also a missing argument, refused before any request. */
class ValidationError extends PontError
{
}
