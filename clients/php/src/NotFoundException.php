<?php

declare(strict_types=1);

namespace Pont;

// Deprecated alias of NotFoundError (before 0.2), declared by NotFoundError.php; this file lets the autoloader find it.
class_exists(NotFoundError::class);
