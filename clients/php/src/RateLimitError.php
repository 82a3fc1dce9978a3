<?php

declare(strict_types=1);

namespace Pont;

/** 429, after the retries: $retryAfter is the seconds to wait. */
class RateLimitError extends PontError
{
    /** @param array<string, string> $headers */
    public function __construct(
        string $message,
        ?int $status = null,
        ?string $errorCode = null,
        ?string $requestId = null,
        mixed $body = null,
        array $headers = [],
        public readonly ?float $retryAfter = null,
    ) {
        parent::__construct($message, $status, $errorCode, $requestId, $body, $headers);
    }
}
