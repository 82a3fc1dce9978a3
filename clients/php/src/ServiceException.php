<?php

declare(strict_types=1);

namespace Pont;

// Deprecated alias of PontError (before 0.2), declared by PontError.php; this file lets the autoloader find it.
class_exists(PontError::class);
