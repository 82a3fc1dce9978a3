<?php

declare(strict_types=1);

namespace Pont;

/** A webhook signature that is invalid, missing, stale or from the future. */
class WebhookSignatureError extends PontError
{
}
