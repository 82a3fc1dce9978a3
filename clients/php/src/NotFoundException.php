<?php

declare(strict_types=1);

namespace Pont;

/** 404: no such resource (e.g. an unregistered Health ID). */
class NotFoundException extends ServiceException
{
}
