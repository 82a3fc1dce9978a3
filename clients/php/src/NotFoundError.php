<?php

declare(strict_types=1);

namespace Pont;

/** 404: no such resource (e.g. an unregistered Health ID). */
class NotFoundError extends PontError
{
}

// The name before 0.2 (deprecated), declared with the class so that `catch (NotFoundException $e)` matches.
class_alias(NotFoundError::class, NotFoundException::class);
