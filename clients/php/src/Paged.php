<?php

declare(strict_types=1);

namespace Pont;

/**
 * Marks a list method: it answers the first page as a plain array, and the module's autoPagingIterator() and pages()
 * page through the whole list when given its name and its arguments.
 */
#[\Attribute(\Attribute::TARGET_METHOD)]
final class Paged
{
}
